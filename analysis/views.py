"""The analysts' pages every kind shares: the study list, a study's page (its kind's), its exports; thin views over
`analysis.services` and `analysis.exports`. A kind's own pages are in its package (kinds/rating/views.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from analysis import export_files, exports, selectors
from analysis.design import design_headers
from analysis.exclusions import ExclusionRules
from analysis.models import ExportFile
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


def query_suffix(request: HttpRequest) -> str:
    """The analysis options of the page's query (baseline, exclusions) as a suffix for its links."""
    keep = {k: request.GET[k] for k in ("baseline", "exclusions") if request.GET.get(k)}
    return ("?" + urlencode(keep)) if keep else ""


def csv_response(lines, filename: str) -> StreamingHttpResponse:
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
    response = csv_response(served(request, lines), download_name(study.slug, f"{what}.csv", query))
    return design_headers(response, study)


@require_GET
@analyst_required
def export(request: HttpRequest, slug: str, what: str) -> HttpResponse:
    study = study_of(slug)
    if what in exports.export_names(study) and export_files.export_as_file(study):
        # Too large to write within a request: its page prepares it as a file.
        return redirect(
            reverse("analysis:export_file", args=[slug, what]) + query_suffix(request), permanent=False
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
    study = study_of(slug)
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
        "query": query_suffix(request),
        **export,
        **files,
    }
    return render(request, "analysis/export_file.html", context)


@require_GET
@analyst_required
def export_file_download(request: HttpRequest, slug: str, pk: int) -> StreamingHttpResponse:
    """A ready export file's bytes, streamed from its stored parts. A file with platform ids only for who may see them."""
    study = study_of(slug)
    file = ExportFile.objects.filter(pk=pk, study=study, state=ExportFile.State.READY).first()
    if file is None or (not file.pseudonymised and not exports.reveals_participant_ids(request.user)):
        raise Http404("No such export file.")
    query = {"exclusions": "none"} if file.no_exclusions else {}
    response = csv_response(
        served(request, export_files.export_file_pieces(file)),
        download_name(study.slug, f"{file.what}.csv", query),
    )
    response["Content-Length"] = str(file.size)
    return design_headers(response, study)
