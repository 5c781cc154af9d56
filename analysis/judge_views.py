"""The judge report's pages: thin views over analysis.judge_report (computed once per data version, cached)."""

from __future__ import annotations

import json

from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from analysis import exports, selectors
from analysis.judge_pages import judge_report_context
from analysis.judge_report import JudgeReport, JudgeReportError, judge_of, judge_report_cached
from analysis.permissions import analyst_required
from studies.models import Study


def report_for(slug: str, name: str) -> JudgeReport:
    """The cached report of judge `name` of study `slug`; 404 when either does not exist."""
    try:
        study = selectors.study_get_by_slug(slug=slug)
        return judge_report_cached(study=study, judge=judge_of(study=study, name=name))
    except Study.DoesNotExist:
        raise Http404("No such study.") from None
    except JudgeReportError as exc:
        raise Http404(str(exc)) from None


@require_GET
@analyst_required
def judge_report_page(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    report = report_for(slug, name)
    return render(request, "analysis/judge_report.html", judge_report_context(report))


@require_GET
@analyst_required
def judge_table(request: HttpRequest, slug: str, name: str, table: str) -> StreamingHttpResponse:
    tables = report_for(slug, name).tables()
    if table not in tables:
        raise Http404("No such table.")
    response = StreamingHttpResponse(
        exports.table_lines(tables[table]), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{slug}-{name}-{table}.csv"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_GET
@analyst_required
def judge_json(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    body = json.dumps(report_for(slug, name).summary(), allow_nan=False)
    response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{slug}-{name}-judge-report.json"'
    return response
