"""The analysts' page of a pairwise study (the kind's `analysis_page`): thin views over the kind's analysis entry
(kinds/pairwise/analysis.py, reached through `analysis_entry`). The page says the result in a sentence, warns when the
intervals are too wide to say anything, says who was excluded and why (kinds/pairwise/page.py), then shows the
strengths, the win rates against the baseline, the win matrix and the position bias as tables, the figures with
their text alternatives, and offers every output file. The baseline and exclusions switches are the rating
dashboard's (?baseline=<condition>, ?exclusions=none). The files are computed once per state of the study's
answers and choice of switches, and kept in the cache."""

from __future__ import annotations

import hashlib
import io
import json
import tempfile
import threading
from pathlib import Path

import pandas as pd
from django.core.cache import cache
from django.db.models import Count, Max
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from analysis.contents import with_contents
from analysis.permissions import analyst_required
from analysis.services import AnalysisError, AnalysisOptions, analysis_entry
from analysis.views import options_from_query
from generation.selectors import judge_run_summary, judges_of
from kinds.pairwise.models import PairItem
from studies.kinds import kinds_with
from studies.models import Condition, Study
from studies.selectors import study_planned_analysis

from . import page as words
from .frame import pairwise_exclusions

CACHE_SECONDS = 15 * 60
_computing = threading.Lock()
# The page draws fewer resamples than the command (it answers a request; `analyze --bootstrap` sets the command's).
PAGE_BOOTSTRAP_SAMPLES = 500
TABLES = (
    "bt_scores.csv", "win_rates.csv", "win_matrix.csv", "position_bias.csv", "exclusions.csv", "drift.csv",
    "judge_flips.csv", "judge_calibration.csv", "judge_bt_scores.csv",
)  # fmt: skip
# Each figure's text alternative: what it draws; its numbers are the tables the page shows above it.
FIGURE_ALTS = {
    "bt_strengths.png": "Each condition's log-strength with its 95 % interval, the baseline at 0: the numbers of "
    "the strengths table above.",
    "win_matrix.png": "How often each condition beat each other one, as shaded cells: the numbers of the "
    "table of wins above.",
}
CONTENT_TYPES = {
    ".csv": "text/csv; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".html": "text/html; charset=utf-8",
    ".json": "application/json",
}


def _study(slug: str) -> Study:
    study = Study.objects.filter(slug=slug).first()
    if study is None or not hasattr(analysis_entry(study=study), "outputs"):
        raise Http404("No pairwise analysis for this study.")
    return study


def _files(study: Study, options: AnalysisOptions | None = None) -> dict[str, bytes]:
    """The analysis' output files for the switches in `options` (baseline, exclusions), from the cache while the
    study's answers are unchanged."""
    options = options or AnalysisOptions()
    answers = PairItem.objects.filter(participant__study=study, answered_at__isnull=False).aggregate(
        n=Count("pk"), last=Max("answered_at")
    )
    runs = [
        judge_run_summary(judge=judge) for judge in judges_of(study=study)
    ]  # a judge's new verdicts count too
    judged = [(run["judge"], run["done"], run["last_rating_id"]) for run in runs]
    switches = f"{options.baseline}:{options.rules is not None}"
    state = f"{answers['n']}:{answers['last']}:{json.dumps(study.exclusion_rules, sort_keys=True)}:{judged}:{switches}"
    key = f"pairwise-page:{study.pk}:{hashlib.sha256(state.encode()).hexdigest()}"
    files = cache.get(key)
    if files is None:
        # One compute at a time in a process: a request that finds the files being computed ahead (beat's task,
        # or a local server's background thread) waits for them instead of computing them a second time.
        with _computing:
            files = cache.get(key)
            if files is None:
                asked = AnalysisOptions(
                    rules=options.rules, baseline=options.baseline, bootstrap_samples=PAGE_BOOTSTRAP_SAMPLES
                )
                with tempfile.TemporaryDirectory() as folder:
                    written = analysis_entry(study=study).outputs(study, asked, Path(folder))
                    files = {path.name: path.read_bytes() for path in written if path.is_file()}
                cache.set(key, files, CACHE_SECONDS)
    return files


def _switches(study: Study, request: HttpRequest) -> tuple[AnalysisOptions, dict]:
    """The page's options from its query (the rating dashboard's switches) and what its form shows."""
    options = options_from_query(request.GET)
    conditions = list(
        Condition.objects.filter(study=study).order_by("position", "name").values_list("name", flat=True)
    )
    if options.baseline is not None and options.baseline not in conditions:
        raise Http404(f"baseline {options.baseline!r} is not a condition of this study")
    shown = {
        "conditions": conditions,
        "baseline": options.baseline or "",
        "no_exclusions": options.rules is not None,
    }
    return options, shown


@require_GET
@analyst_required
def pairwise_page(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    options, shown = _switches(study, request)
    context = {"study": study, **shown}
    try:
        files = _files(study, options)
    except AnalysisError as exc:
        exclusions = pairwise_exclusions(study=study, rules=options.rules)
        context.update(
            problem=str(exc),
            exclusions_line=words.exclusion_sentence(exclusions, applied=options.rules is None)
            if len(exclusions)
            else "",
        )
        return render(request, "analysis/pairwise.html", context)
    summary = words.summary_of(files)
    planned = study_planned_analysis(study=study)
    exclusions = pd.read_csv(io.BytesIO(files["exclusions.csv"]), keep_default_na=False)
    context.update(
        summary=summary,
        primary_test=summary.get("primary_test") or planned["primary_test"],
        headline=words.headline(summary),
        headline_lines=words.headline_sentences(summary),
        too_wide=words.too_wide(summary, study=study, alpha=float(planned["alpha"])),
        exclusions_line=words.exclusion_sentence(exclusions, applied=options.rules is None),
        tables=[words.table_html(name, files[name]) for name in TABLES if name in files],
        figures=[
            (name, FIGURE_ALTS.get(name, f"{name}: the same numbers are in the tables above"))
            for name in sorted(files)
            if name.endswith(".png")
        ],
        downloads=sorted(files),
        query=_query(options),
    )
    return with_contents(render(request, "analysis/pairwise.html", context))


def _query(options: AnalysisOptions) -> str:
    keep = {"baseline": options.baseline or "", "exclusions": "none" if options.rules is not None else ""}
    kept = "&".join(f"{k}={v}" for k, v in keep.items() if v)
    return f"?{kept}" if kept else ""


def pairwise_file_response(study: Study, name: str, options: AnalysisOptions | None = None) -> HttpResponse:
    """One output file of the study's pairwise analysis (Http404 when the study has none, or no such file)."""
    if not hasattr(analysis_entry(study=study), "outputs"):
        raise Http404("No pairwise analysis for this study.")
    try:
        files = _files(study, options)
    except AnalysisError as exc:
        raise Http404(str(exc)) from None
    if name not in files:
        raise Http404("No such file.")
    suffix = name[name.rfind(".") :]
    response = HttpResponse(files[name], content_type=CONTENT_TYPES.get(suffix, "application/octet-stream"))
    if suffix not in (".png", ".svg", ".html"):
        response["Content-Disposition"] = f'attachment; filename="{study.slug}-{name}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_GET
@analyst_required
def pairwise_file(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    study = _study(slug)
    return pairwise_file_response(study, name, _switches(study, request)[0])


PAGE_NAME = "analysis:pairwise"  # the page these files serve (a kind's `StudyKind.analysis_page`)


def pairwise_pages_refresh() -> int:
    """Compute ahead the page's files of every live or closed study whose analysts' page is this one and whose
    answers changed since (its cache key is their state, so an unchanged study costs one count): beat runs it
    every minute, a server without a broker once at start (config/warm.py), so that the page answers from the
    cache. Returns how many studies it looked at."""
    studies = Study.objects.filter(
        kind__in=kinds_with(lambda kind: kind.analysis_page == PAGE_NAME),
        state__in=[Study.State.LIVE, Study.State.CLOSED],
    ).order_by("pk")
    seen = 0
    for study in studies:
        try:
            _files(study)
        except AnalysisError:  # nothing to analyse yet: the page says why when opened
            pass
        seen += 1
    return seen
