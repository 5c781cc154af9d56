"""A kind's analysts' page computed ahead on the workers and kept in the cache: the page a kind serves at
/analysis/<slug>/ (`StudyKind.analysis_view`, the rating kind's dashboard), drawn by its analysis entry's
`page_render`.

A rating study's full analysis (bootstrap, ordinal model, figures) takes seconds to tens of seconds, too long for a
request. So the dashboard never computes: it shows the last computed result at once (a `Snapshot`), says whether
that result is current, and when the data has changed since, asks a worker to compute a new one.

- The data version is `services.study_data_fingerprint` (counts and last ids of ratings and participants, the
  conditions, the emotions' valence groups, the scale): any new rating changes it.
- One snapshot per (study, options) — the latest — under `_result_key`, with the fingerprint it was computed on,
  which is also kept alone under `_fingerprint_key`: whether a snapshot is current is known without reading it
  (a snapshot is the whole analysis, its figures and its pages: a read unpickles them all).
- A compute is requested at most once per (study, options, fingerprint): `cache.add` on `_running_key` is the
  claim (atomic in Redis), released when the compute ends or fails and expiring with the task's time limit.
- With a broker the work goes to Celery (`analysis.tasks.analysis_snapshot_task`); without one (`make run`) to a
  background thread of this process, so the request that asked returns at once.
- A cache that cannot be reached fails open: the request computes the analysis itself, as before.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connections, transaction
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from analysis.exclusions import ExclusionRules
from analysis.services import AnalysisOptions, analysis_entry, study_analyze, study_data_fingerprint
from studies.kinds import kinds_with
from studies.models import Study

logger = logging.getLogger(__name__)

SNAPSHOT_SECONDS = (
    30 * 24 * 3600
)  # the latest result is kept until replaced (a month without a view: recomputed)
SNAPSHOT_TASK = "analysis.tasks.analysis_snapshot_task"
RUNNING_SECONDS = 600  # the compute task's hard time limit: a claim outlives no worker that died holding it


class CacheUnavailable(Exception):
    """The cache could not be read or written: the caller computes in the request instead."""


@dataclass
class Snapshot:
    fingerprint: str
    computed_at: dt.datetime
    seconds: float
    analysis: Any  # the study's kind's analysis (the rating kind's RatingAnalysis)
    figures: dict[str, str] = field(default_factory=dict)  # name → inline SVG markup
    body_html: str = ""  # the dashboard's results section, rendered once here rather than on every view
    report_html: str = ""  # report.html with the same figures, rendered once here ("": an older snapshot)

    def body_safe(self) -> SafeString:
        return mark_safe(self.body_html)  # noqa: S308 — rendered by our own template, which escapes


@dataclass(frozen=True)
class PageRender:
    """What a kind's analysis entry draws of an analysis for its page (`page_render`), once, on the worker: the
    figures as inline SVG by name, the page's body and the downloadable report.html."""

    figures: dict[str, str]
    body_html: str
    report_html: str


@dataclass
class DashboardState:
    snapshot: Snapshot | None
    current: bool  # the snapshot was computed on the data as it is now
    computing: bool  # a newer result has been asked for and is not in yet


def options_token(*, baseline: str | None, no_exclusions: bool) -> str:
    return hashlib.sha256(repr((baseline or "", bool(no_exclusions))).encode()).hexdigest()[:16]


def options_build(*, baseline: str | None, no_exclusions: bool) -> AnalysisOptions:
    # None: the study's declared exclusion rules.
    rules = ExclusionRules.none() if no_exclusions else None
    return AnalysisOptions(rules=rules, baseline=baseline or None)


def _result_key(study_id: int, token: str) -> str:
    return f"analysis:snapshot:{study_id}:{token}"


def _fingerprint_key(study_id: int, token: str) -> str:
    return f"analysis:snapshot-fingerprint:{study_id}:{token}"


def _running_key(study_id: int, token: str) -> str:
    return f"analysis:computing:{study_id}:{token}"


def _cache(call, *args):
    try:
        return call(*args)
    except Exception as exc:  # noqa: BLE001 — any cache failure (Redis down, timeout) means the same: no cache
        raise CacheUnavailable(str(exc)) from exc


def snapshot_build(*, study: Study, baseline: str | None, no_exclusions: bool) -> Snapshot:
    """Compute the analysis and its figures now (what the worker runs; also the fail-open path)."""
    started = time.perf_counter()
    fingerprint = study_data_fingerprint(study=study)
    analysis = study_analyze(
        study=study, options=options_build(baseline=baseline, no_exclusions=no_exclusions)
    )
    page = analysis_entry(study=study).page_render(analysis)
    return Snapshot(
        fingerprint=fingerprint,
        computed_at=timezone.now(),
        seconds=round(time.perf_counter() - started, 2),
        analysis=analysis,
        figures=page.figures,
        body_html=page.body_html,
        report_html=page.report_html,
    )


def snapshot_compute(*, study_id: int, baseline: str | None, no_exclusions: bool) -> Snapshot | None:
    """Compute and store the latest snapshot of a study (the Celery task and the local thread run this).
    Idempotent: a snapshot already current is kept. Returns None for a study that no longer exists."""
    token = options_token(baseline=baseline, no_exclusions=no_exclusions)
    try:
        study = Study.objects.filter(pk=study_id).first()
        if study is None:
            return None
        found = cache.get(_result_key(study.pk, token))
        if found is not None and found.fingerprint == study_data_fingerprint(study=study):
            cache.set(_fingerprint_key(study.pk, token), found.fingerprint, SNAPSHOT_SECONDS)
            return found
        snapshot = snapshot_build(study=study, baseline=baseline, no_exclusions=no_exclusions)
        cache.set(_result_key(study.pk, token), snapshot, SNAPSHOT_SECONDS)
        cache.set(_fingerprint_key(study.pk, token), snapshot.fingerprint, SNAPSHOT_SECONDS)
        return snapshot
    finally:
        # Release the claim: the next change of the data may ask again at once.
        try:
            cache.delete(_running_key(study_id, token))
        except Exception:  # noqa: BLE001
            logger.warning(
                "analysis: could not release the compute claim of study %s", study_id, exc_info=True
            )


def snapshot_get(*, study: Study, baseline: str | None, no_exclusions: bool) -> Snapshot | None:
    token = options_token(baseline=baseline, no_exclusions=no_exclusions)
    return _cache(cache.get, _result_key(study.pk, token))


def snapshot_request(*, study: Study, baseline: str | None, no_exclusions: bool) -> None:
    """Ask for a new snapshot unless one is already being computed for these options (then the next view after
    it ends asks again if the data moved on meanwhile)."""
    token = options_token(baseline=baseline, no_exclusions=no_exclusions)
    key = _running_key(study.pk, token)
    if _cache(cache.add, key, timezone.now().isoformat(), RUNNING_SECONDS):
        try:
            _dispatch(study_id=study.pk, baseline=baseline, no_exclusions=no_exclusions)
        except Exception:
            cache.delete(key)  # nobody will compute: let the next view ask again
            raise


def _stale(*, study: Study, fingerprint: str, baseline: str | None, no_exclusions: bool) -> bool:
    """No snapshot of these options computed on `fingerprint` (read from its small key, not the snapshot)."""
    token = options_token(baseline=baseline, no_exclusions=no_exclusions)
    return _cache(cache.get, _fingerprint_key(study.pk, token)) != fingerprint


def dashboard_state(*, study: Study, baseline: str | None, no_exclusions: bool) -> DashboardState:
    """What the dashboard shows now: the latest snapshot (maybe None), whether it is current, and whether a new
    one is being computed (asked for here when the data changed). On the default baseline, the page's other
    side of the "No exclusions" switch is asked for too, after this one, so that the switch finds its result
    ready. Raises CacheUnavailable."""
    fingerprint = study_data_fingerprint(study=study)
    snapshot = snapshot_get(study=study, baseline=baseline, no_exclusions=no_exclusions)
    current = snapshot is not None and snapshot.fingerprint == fingerprint
    if not current:
        snapshot_request(study=study, baseline=baseline, no_exclusions=no_exclusions)
    if baseline is None and _stale(
        study=study, fingerprint=fingerprint, baseline=None, no_exclusions=not no_exclusions
    ):
        snapshot_request(study=study, baseline=None, no_exclusions=not no_exclusions)
    return DashboardState(snapshot=snapshot, current=current, computing=not current)


def snapshots_refresh() -> int:
    """Ask for new snapshots, under the declared exclusion rules and under none (the page's switch), of each
    live or closed study whose kind's page is computed ahead (`StudyKind.analysis_view`) and whose data
    changed since they were computed: beat runs this every minute, so new ratings are analysed ahead of the next
    view; a closed study's data no longer changes, so it is computed once (after its close, or on a new cache).
    A server without a broker (`make run`) runs it once at start (config/wsgi.py). Returns how many computes
    were asked for."""
    asked = 0
    dashboard_kinds = kinds_with(lambda kind: kind.analysis_view is not None)
    states = [Study.State.LIVE, Study.State.CLOSED]
    for study in Study.objects.filter(kind__in=dashboard_kinds, state__in=states).order_by("pk"):
        fingerprint = study_data_fingerprint(study=study)
        for no_exclusions in (False, True):
            if _stale(study=study, fingerprint=fingerprint, baseline=None, no_exclusions=no_exclusions):
                snapshot_request(study=study, baseline=None, no_exclusions=no_exclusions)
                asked += 1
    return asked


# --- Dispatch --------------------------------------------------------------------------------------------

_local: ThreadPoolExecutor | None = None
_local_lock = threading.Lock()


def _local_executor() -> ThreadPoolExecutor:
    """One background thread: without a broker, computes queue up rather than compete for the two cores."""
    global _local
    with _local_lock:
        if _local is None:
            _local = ThreadPoolExecutor(max_workers=1, thread_name_prefix="analysis")
    return _local


def local_submit(call) -> None:
    """Run `call()` on the one background thread of a server without a broker, after the computes queued
    before it (one at a time: they share matplotlib, which is not thread-safe, and two cores)."""

    def run() -> None:
        try:
            call()
        except Exception:
            logger.exception("analysis: a background compute failed")
        finally:
            connections.close_all()

    _local_executor().submit(run)


def _run_here(study_id: int, baseline: str | None, no_exclusions: bool) -> None:
    try:
        snapshot_compute(study_id=study_id, baseline=baseline, no_exclusions=no_exclusions)
    except Exception:
        logger.exception("analysis: computing study %s failed", study_id)
    finally:
        connections.close_all()


def _dispatch(*, study_id: int, baseline: str | None, no_exclusions: bool) -> None:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        _local_executor().submit(_run_here, study_id, baseline, no_exclusions)
        return
    # By name: analysis.tasks imports this module (no import cycle), and the task is registered on the workers.
    from celery import current_app

    transaction.on_commit(
        lambda: current_app.send_task(SNAPSHOT_TASK, args=(study_id, baseline, no_exclusions))
    )
