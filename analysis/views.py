"""The analysts' pages every kind shares: the study list, a study's page (its kind's), its exports; thin views over
`analysis.services` and `analysis.exports`. A kind's own pages are in its package (kinds/rating/views.py)."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from analysis import exports, selectors
from analysis.design import design_headers
from analysis.exclusions import ExclusionRules
from analysis.permissions import analyst_required
from analysis.services import AnalysisOptions
from studies.kinds import kind_of, resolved
from studies.models import Study


def study_of(slug: str) -> Study:
    try:
        return selectors.study_get_by_slug(slug=slug)
    except Study.DoesNotExist:
        raise Http404("No such study.") from None


def options_from_query(query) -> AnalysisOptions:
    """?baseline=<condition> and ?exclusions=none (default: the study's declared rules)."""
    rules = ExclusionRules.none() if query.get("exclusions") == "none" else None
    return AnalysisOptions(rules=rules, baseline=query.get("baseline") or None)


def download_name(slug: str, name: str, query) -> str:
    """A downloaded file's name, saying whether the study's declared exclusion rules were applied
    (`empathy-ratings-declared-exclusions.csv`) or none (`empathy-ratings-no-exclusions.csv`)."""
    stem, dot, ext = name.rpartition(".")
    applied = "no-exclusions" if query.get("exclusions") == "none" else "declared-exclusions"
    return f"{slug}-{stem}-{applied}.{ext}" if dot else f"{slug}-{name}-{applied}"


@require_GET
@analyst_required
def index(request: HttpRequest) -> HttpResponse:
    """Every study whose kind has an analysts' page (`StudyKind.analysis_page`), linked to it."""
    studies = [(study, kind_of(study).analysis_url(study)) for study in selectors.study_list()]
    return render(request, "analysis/index.html", {"studies": [(s, url) for s, url in studies if url]})


@require_GET
@analyst_required
def study_page(request: HttpRequest, slug: str) -> HttpResponse:
    """/analysis/<slug>/: the study's analysts' page: served here by its kind's view (`StudyKind.analysis_view`, the
    rating kind's dashboard), else a redirect to the kind's own page (`StudyKind.analysis_page`)."""
    study = study_of(slug)
    kind = kind_of(study)
    if kind.analysis_view is not None:
        return resolved(kind.analysis_view)(request, study)
    if kind.analysis_page is None:
        raise Http404(f"No analysts' page for {study.kind} studies.")
    return redirect(kind.analysis_page, slug=study.slug)


def csv_response(lines, filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


def export_response(study: Study, what: str, query, user) -> StreamingHttpResponse:
    """One export of the study (`what`) as a streamed CSV download, under the exclusion rules the query names
    (the dashboard's link and the API's alike); Http404 for an unknown export."""
    if what not in exports.export_names(study):
        raise Http404("No such export.")
    lines = exports.export_lines(
        study=study,
        what=what,
        rules=options_from_query(query).rules,
        reveal_participant_ids=exports.reveals_participant_ids(user),
    )
    response = csv_response(lines, download_name(study.slug, f"{what}.csv", query))
    return design_headers(response, study)


@require_GET
@analyst_required
def export(request: HttpRequest, slug: str, what: str) -> StreamingHttpResponse:
    return export_response(study_of(slug), what, request.GET, request.user)
