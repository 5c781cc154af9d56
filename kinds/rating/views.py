"""The rating kind's analysts' pages (`StudyKind.analysis_view` at /analysis/<slug>/, and `analysis_urls`): the
dashboard, its status, report.html, figures and tables, thin views over the analyses computed ahead
(analysis/snapshots.py), kinds/rating/report.py and figures.py. Names and addresses are analysis/urls.py's
(analysis:dashboard, analysis:report, ...)."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from analysis import export_files, exports, selectors, snapshots
from analysis.contents import with_contents
from analysis.design import design_headers, design_of, dry_run_of
from analysis.judge_report import judges_list
from analysis.permissions import analyst_required
from analysis.services import AnalysisError, study_analyze_cached
from analysis.views import csv_response, download_name, options_from_query, query_suffix, study_of
from studies.kinds import kind_of
from studies.models import Study

from . import figures
from . import report as reports
from .kind import RATING


def _snapshot(study: Study, request: HttpRequest) -> snapshots.Snapshot | None:
    """The latest snapshot of the dashboard's options (current or not), if any."""
    baseline, no_exclusions = _snapshot_options(study, request)
    try:
        return snapshots.snapshot_get(study=study, baseline=baseline, no_exclusions=no_exclusions)
    except snapshots.CacheUnavailable:
        return None


def _analysis(study: Study, request: HttpRequest):
    """The analysis the dashboard shows (the latest snapshot, current or not), else one computed now."""
    found = _snapshot(study, request)
    if found is not None:
        return found.analysis
    try:
        return study_analyze_cached(study=study, options=options_from_query(request.GET))
    except AnalysisError as exc:
        raise Http404(str(exc)) from None


def _snapshot_options(study: Study, request: HttpRequest) -> tuple[str | None, bool]:
    """(baseline, no exclusions) from the query; an unknown baseline is a 404, as before."""
    baseline = request.GET.get("baseline") or None
    if baseline is not None and baseline not in {c.name for c in selectors.condition_list(study=study)}:
        raise Http404(f"baseline {baseline!r} is not a condition of this study")
    return baseline, request.GET.get("exclusions") == "none"


def _dashboard_state(study: Study, request: HttpRequest) -> snapshots.DashboardState:
    baseline, no_exclusions = _snapshot_options(study, request)
    try:
        return snapshots.dashboard_state(study=study, baseline=baseline, no_exclusions=no_exclusions)
    except snapshots.CacheUnavailable:
        # No cache, nowhere to keep a result computed ahead: compute it here (slow, but an answer).
        try:
            built = snapshots.snapshot_build(study=study, baseline=baseline, no_exclusions=no_exclusions)
        except AnalysisError as exc:
            raise Http404(str(exc)) from None
        return snapshots.DashboardState(snapshot=built, current=True, computing=False)


def _rating_study(slug: str) -> Study:
    """The rating study with this slug; Http404 for none, or for a study of another kind (its pages are its
    kind's)."""
    study = study_of(slug)
    if kind_of(study) is not RATING:
        raise Http404("No such page for this kind of study.")
    return study


def dashboard(request: HttpRequest, study: Study) -> HttpResponse:
    """The dashboard (`StudyKind.analysis_view`: analysis/views.py `study_page` checks the analyst and calls it)."""
    state = _dashboard_state(study, request)
    snapshot = state.snapshot
    context = {
        "table_names": list(snapshot.analysis.page_tables()) if snapshot else [],
        "body": snapshot.body_safe() if snapshot else "",
    }
    context.update(
        study=study,
        state=state,
        snapshot=state.snapshot,
        conditions=[c.name for c in selectors.condition_list(study=study)],
        baseline=request.GET.get("baseline") or "",
        figure_names=figures.FIGURES,
        query=query_suffix(request),
        no_exclusions=request.GET.get("exclusions") == "none",
        design=design_of(study),  # live: an amendment shows at once, whatever the snapshot's age
        placeholders=dry_run_of(study),
        judges=judges_list(study=study),
        export_as_file=export_files.export_as_file(study),
        headline=reports.headline_lines(snapshot.analysis) if snapshot else [],
        analysis=snapshot.analysis if snapshot else None,  # the headline names its primary test
    )
    return with_contents(render(request, "analysis/dashboard.html", context))


@require_GET
@never_cache
@analyst_required
def dashboard_status(request: HttpRequest, slug: str) -> JsonResponse:
    """Whether the dashboard's result is current (the page polls this while a new one is computed)."""
    study = _rating_study(slug)
    state = _dashboard_state(study, request)
    snapshot = state.snapshot
    return JsonResponse(
        {
            "current": state.current,
            "computing": state.computing,
            "computed_at": snapshot.computed_at.isoformat() if snapshot else None,
            "fingerprint": snapshot.fingerprint if snapshot else None,
        }
    )


@require_GET
@analyst_required
def figure(request: HttpRequest, slug: str, name: str, fmt: str) -> HttpResponse:
    if name not in figures.FIGURES or fmt not in {"png", "svg"}:
        raise Http404("No such figure.")
    study = _rating_study(slug)
    analysis = _analysis(study, request)
    if analysis.empty:
        raise Http404("No ratings yet.")
    content_type = "image/png" if fmt == "png" else "image/svg+xml"
    return design_headers(
        HttpResponse(figures.figure_render(analysis, name, fmt), content_type=content_type), study
    )


@require_GET
@analyst_required
def report(request: HttpRequest, slug: str) -> HttpResponse:
    """report.html, as `manage.py analyze` writes it, for the dashboard's analysis (same baseline and
    exclusions), downloaded as a file."""
    study = _rating_study(slug)
    found = _snapshot(study, request)
    # The snapshot's report.html, rendered with it (figures drawn once); else drawn now.
    html = found.report_html if found is not None else ""
    html = html or reports.report_html(_analysis(study, request))
    response = HttpResponse(html, content_type="text/html; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="{download_name(study.slug, "report.html", request.GET)}"'
    )
    response["X-Content-Type-Options"] = "nosniff"
    return design_headers(response, study)


@require_GET
@analyst_required
def table(request: HttpRequest, slug: str, name: str) -> StreamingHttpResponse:
    study = _rating_study(slug)
    analysis = _analysis(study, request)
    tables = analysis.page_tables()
    if name not in tables:
        raise Http404("No such table.")
    return design_headers(
        csv_response(
            exports.table_lines(tables[name]),
            download_name(analysis.study_slug, f"{name}.csv", request.GET),
        ),
        study,
    )
