"""The judge report's pages: thin views over analysis.judge_report, computed ahead (analysis.judge_ahead)."""

from __future__ import annotations

import json

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from analysis import exports, judge_ahead, selectors
from analysis.contents import with_contents
from analysis.judge_pages import judge_report_context
from analysis.judge_report import JudgeReport, JudgeReportError, judge_of
from analysis.permissions import analyst_required
from analysis.snapshots import CacheUnavailable
from generation.selectors import judge_rates_scale
from studies.models import Study


def study_and_judge(slug: str, name: str):
    """(study, judge); 404 when either does not exist or the study's kind is not judged."""
    try:
        study = selectors.study_get_by_slug(slug=slug)
    except Study.DoesNotExist:
        raise Http404("No such study.") from None
    if not judge_rates_scale(study=study):  # a pairwise judge is reported on the study's pairwise page
        raise Http404(f"No judge report of this kind for {study.kind} studies.")
    try:
        return study, judge_of(study=study, name=name)
    except JudgeReportError as exc:
        raise Http404(str(exc)) from None


def report_for(slug: str, name: str) -> JudgeReport:
    """The report on the data as it is now (downloads, API)."""
    study, judge = study_and_judge(slug, name)
    return judge_ahead.judge_report_current(study=study, judge=judge)


def _state(study, judge) -> judge_ahead.JudgeReportState:
    try:
        return judge_ahead.judge_report_state(study=study, judge=judge)
    except CacheUnavailable:  # nowhere to keep a report computed ahead: compute it here
        return judge_ahead.JudgeReportState(
            judge_ahead.stored_build(study=study, judge=judge), current=True, computing=False
        )


@require_GET
@analyst_required
def judge_report_page(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    study, judge = study_and_judge(slug, name)
    state = _state(study, judge)
    context = judge_report_context(state.stored.report) if state.stored else {}
    context.update(study=study, judge=judge, state=state, stored=state.stored)
    return with_contents(render(request, "analysis/judge_report.html", context))


@require_GET
@never_cache
@analyst_required
def judge_status(request: HttpRequest, slug: str, name: str) -> JsonResponse:
    """Whether the page's report is current (the page polls this while a new one is computed)."""
    study, judge = study_and_judge(slug, name)
    state = _state(study, judge)
    return JsonResponse(
        {
            "current": state.current,
            "computing": state.computing,
            "computed_at": state.stored.computed_at.isoformat() if state.stored else None,
        }
    )


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
