"""The analysts' dashboard: thin views over `analysis.services`, `analysis.reports` and `analysis.exports`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from analysis import export_files, exports, figures, reports, selectors, snapshots
from analysis.contents import with_contents
from analysis.design import design_headers, design_of, dry_run_of
from analysis.exclusions import ExclusionRules
from analysis.judge_report import judges_list
from analysis.models import ExportFile
from analysis.permissions import analyst_required
from analysis.services import AnalysisError, AnalysisOptions, study_analyze_cached
from studies.kinds import kind_of
from studies.models import Study


def _study(slug: str) -> Study:
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


def _query_suffix(request: HttpRequest) -> str:
    keep = {k: request.GET[k] for k in ("baseline", "exclusions") if request.GET.get(k)}
    return ("?" + urlencode(keep)) if keep else ""


@require_GET
@analyst_required
def index(request: HttpRequest) -> HttpResponse:
    """Every study whose kind has an analysts' page (`StudyKind.analysis_page`), linked to it."""
    studies = [(study, kind_of(study).analysis_url(study)) for study in selectors.study_list()]
    return render(request, "analysis/index.html", {"studies": [(s, url) for s, url in studies if url]})


@require_GET
@analyst_required
def dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    page = kind_of(study).analysis_page
    if page is None:
        raise Http404(f"No analysts' page for {study.kind} studies.")
    if page != snapshots.DASHBOARD_PAGE:
        # A kind with its own analysts' page (the questionnaire kind); the study list links every study here.
        return redirect(page, slug=study.slug)
    state = _dashboard_state(study, request)
    snapshot = state.snapshot
    context = {
        "table_names": ["main_tests", *snapshot.analysis.tables()] if snapshot else [],
        "body": snapshot.body_safe() if snapshot else "",
    }
    context.update(
        study=study,
        state=state,
        snapshot=state.snapshot,
        conditions=[c.name for c in selectors.condition_list(study=study)],
        baseline=request.GET.get("baseline") or "",
        figure_names=figures.FIGURES,
        query=_query_suffix(request),
        no_exclusions=request.GET.get("exclusions") == "none",
        design=design_of(study),  # live: an amendment shows at once, whatever the snapshot's age
        placeholders=dry_run_of(study),
        judges=judges_list(study=study),
        headline=reports.headline_lines(snapshot.analysis) if snapshot else [],
        export_as_file=export_files.export_as_file(study),
    )
    return with_contents(render(request, "analysis/dashboard.html", context))


@require_GET
@never_cache
@analyst_required
def dashboard_status(request: HttpRequest, slug: str) -> JsonResponse:
    """Whether the dashboard's result is current (the page polls this while a new one is computed)."""
    study = _study(slug)
    if kind_of(study).analysis_page != snapshots.DASHBOARD_PAGE:
        raise Http404("No dashboard status for this kind of study.")
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
    study = _study(slug)
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
    study = _study(slug)
    if kind_of(study).analysis_page != snapshots.DASHBOARD_PAGE:
        raise Http404("No report.html for this kind of study.")
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


def _csv_response(lines, filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


def served(request, pieces: Iterator):
    """`pieces` as the server streams them. Under ASGI, Django reads a synchronous iterator whole before sending
    any of it (a million ratings: the whole file in the process's memory, the first byte at the end); so there
    each piece is read in the request's own thread (its database connection, which the export's COPY uses) and
    sent as it comes, and the event loop serves other requests meanwhile. Under WSGI, as it is."""
    if not hasattr(request, "scope"):
        return pieces
    return _async_pieces(pieces)


async def _async_pieces(pieces: Iterator) -> AsyncIterator:
    step = sync_to_async(next, thread_sensitive=True)
    done = object()
    try:
        while (piece := await step(pieces, done)) is not done:
            yield piece
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:  # a download stopped early: the export's generator stops its COPY
            await sync_to_async(close, thread_sensitive=True)()


def export_response(request, study: Study, what: str, query, user) -> StreamingHttpResponse:
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
    response = _csv_response(served(request, lines), download_name(study.slug, f"{what}.csv", query))
    return design_headers(response, study)


@require_GET
@analyst_required
def export(request: HttpRequest, slug: str, what: str) -> HttpResponse:
    study = _study(slug)
    if what in exports.export_names(study) and export_files.export_as_file(study):
        # Too large to write within a request: its page prepares it as a file.
        return redirect(
            reverse("analysis:export_file", args=[slug, what]) + _query_suffix(request), permanent=False
        )
    return export_response(request, study, what, request.GET, request.user)


def _file_export(request: HttpRequest, what: str) -> dict:
    return {
        "what": what,
        "no_exclusions": request.GET.get("exclusions") == "none",
        "pseudonymised": not exports.reveals_participant_ids(request.user),
    }


@never_cache
@analyst_required
@require_http_methods(["GET", "HEAD", "POST"])
def export_file(request: HttpRequest, slug: str, what: str) -> HttpResponse:
    """An export prepared as a file: the newest ready one with its download link, the one being prepared, and a
    button that asks for a fresh one (the page refreshes itself while one is prepared)."""
    study = _study(slug)
    if what not in exports.export_names(study):
        raise Http404("No such export.")
    export = _file_export(request, what)
    if request.method == "POST":
        export_files.export_file_request(study=study, user=request.user, **export)
        return redirect(request.get_full_path())
    files = export_files.export_file_latest(study=study, **export)
    context = {
        "study": study,
        "filename": download_name(study.slug, f"{what}.csv", request.GET),
        "query": _query_suffix(request),
        **export,
        **files,
    }
    return render(request, "analysis/export_file.html", context)


@require_GET
@analyst_required
def export_file_download(request: HttpRequest, slug: str, pk: int) -> StreamingHttpResponse:
    """A ready export file's bytes, streamed from its stored parts. A file with platform ids only for who may see them."""
    study = _study(slug)
    file = ExportFile.objects.filter(pk=pk, study=study, state=ExportFile.State.READY).first()
    if file is None or (not file.pseudonymised and not exports.reveals_participant_ids(request.user)):
        raise Http404("No such export file.")
    query = {"exclusions": "none"} if file.no_exclusions else {}
    response = _csv_response(
        served(request, export_files.export_file_pieces(file)),
        download_name(study.slug, f"{file.what}.csv", query),
    )
    response["Content-Length"] = str(file.size)
    return design_headers(response, study)


@require_GET
@analyst_required
def table(request: HttpRequest, slug: str, name: str) -> StreamingHttpResponse:
    study = _study(slug)
    analysis = _analysis(study, request)
    tables = analysis.tables()
    tables["main_tests"] = reports.main_table(analysis)
    if name not in tables:
        raise Http404("No such table.")
    return design_headers(
        _csv_response(
            exports.table_lines(tables[name]),
            download_name(analysis.study_slug, f"{name}.csv", request.GET),
        ),
        study,
    )
