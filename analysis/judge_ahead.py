"""Judge reports computed ahead and kept in the cache, as the dashboard's analysis is (analysis/snapshots.py).

The calibration's bootstrap CIs take about 3 s on the published study's 6,000 responses: too long for a request.
The page shows the last report computed at once and says whether it is current; when the data changed since (a new
human rating, exclusion flag, judge rating...), it asks a worker for a new one and the page polls until it is in.

- The data version (`report_version`): the study's `study_data_fingerprint` plus the judge's run (ratings done,
  the last one's id and time, samples per response).
- One stored report per (study, judge), the latest, with the version it was computed on.
- A compute is claimed with `cache.add` (atomic in Redis), released when it ends, expiring with the task's limit.
- With a broker the work goes to Celery (`analysis.tasks.judge_report_task`, by name); without one, to the same
  single background thread the dashboard uses. A cache that cannot be reached fails open: the request computes.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.db import connections, transaction
from django.utils import timezone

from analysis.judge_report import JudgeReport, judge_report_of
from analysis.services import study_data_fingerprint
from analysis.snapshots import CacheUnavailable, _cache, _local_executor
from generation.selectors import judge_rates_scale, judge_run_summary, judges_of
from studies.kinds import kinds_with
from studies.models import Study

logger = logging.getLogger(__name__)

STORED_SECONDS = 30 * 24 * 3600
RUNNING_SECONDS = 600
JUDGE_REPORT_TASK = "analysis.tasks.judge_report_task"


@dataclass
class StoredReport:
    version: str
    computed_at: object
    seconds: float
    report: JudgeReport


@dataclass
class JudgeReportState:
    stored: StoredReport | None
    current: bool
    computing: bool


def report_version(*, study: Study, judge) -> str:
    run = judge_run_summary(judge=judge)
    judged = (run["done"], run["last_rating_id"], run["last_rated_at"], judge.n_samples)
    raw = repr((study_data_fingerprint(study=study), judged))
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def _stored_key(study_id: int, judge_id: int) -> str:
    return f"judge-report:stored:{study_id}:{judge_id}"


def _running_key(study_id: int, judge_id: int) -> str:
    return f"judge-report:computing:{study_id}:{judge_id}"


def stored_build(*, study: Study, judge) -> StoredReport:
    started = time.perf_counter()
    version = report_version(study=study, judge=judge)
    report = judge_report_of(study=study, judge=judge)
    return StoredReport(version, timezone.now(), round(time.perf_counter() - started, 2), report)


def judge_report_compute(*, study_id: int, judge_id: int) -> StoredReport | None:
    """Compute and store the latest report (the Celery task and the local thread run this). Idempotent: a report
    already current is kept. None when the study or the judge no longer exists."""
    try:
        study = Study.objects.filter(pk=study_id).first()
        judge = next((j for j in judges_of(study=study) if j.pk == judge_id), None) if study else None
        if judge is None:
            return None
        found = cache.get(_stored_key(study_id, judge_id))
        if found is not None and found.version == report_version(study=study, judge=judge):
            return found
        stored = stored_build(study=study, judge=judge)
        cache.set(_stored_key(study_id, judge_id), stored, STORED_SECONDS)
        return stored
    finally:
        try:
            cache.delete(_running_key(study_id, judge_id))
        except Exception:  # noqa: BLE001
            logger.warning(
                "judge report: could not release the claim of %s/%s", study_id, judge_id, exc_info=True
            )


def judge_report_state(*, study: Study, judge) -> JudgeReportState:
    """What the page shows now: the latest stored report (maybe None), whether it is current, and whether a new
    one is being computed (asked for here when the data changed). Raises CacheUnavailable."""
    version = report_version(study=study, judge=judge)
    stored = _cache(cache.get, _stored_key(study.pk, judge.pk))
    if stored is not None and stored.version == version:
        return JudgeReportState(stored, current=True, computing=False)
    if _cache(cache.add, _running_key(study.pk, judge.pk), timezone.now().isoformat(), RUNNING_SECONDS):
        try:
            _dispatch(study.pk, judge.pk)
        except Exception:
            cache.delete(_running_key(study.pk, judge.pk))
            raise
    return JudgeReportState(stored, current=False, computing=True)


def judge_reports_refresh() -> int:
    """Ask for a new report of every judge of a study of a judged kind whose data changed since its stored report (beat runs
    this: a judge run that finishes, or new human ratings, are reported before the next view). Returns how many
    computes were asked for (a compute already claimed is not asked twice)."""
    asked = 0
    for study in Study.objects.filter(kind__in=kinds_with(lambda kind: kind.judged)).order_by("id"):
        if not judge_rates_scale(study=study):  # its judges are reported with its own analysis
            continue
        for judge in judges_of(study=study):
            state = judge_report_state(study=study, judge=judge)
            asked += int(not state.current)
    return asked


def judge_report_current(*, study: Study, judge) -> JudgeReport:
    """The report on the data as it is now: the stored one when current, else computed here and stored (the
    downloads, the API and the command want current numbers, not the page's quick answer)."""
    try:
        stored = _cache(cache.get, _stored_key(study.pk, judge.pk))
    except CacheUnavailable:
        return judge_report_of(study=study, judge=judge)
    if stored is not None and stored.version == report_version(study=study, judge=judge):
        return stored.report
    stored = stored_build(study=study, judge=judge)
    try:
        _cache(cache.set, _stored_key(study.pk, judge.pk), stored, STORED_SECONDS)
    except CacheUnavailable:
        logger.warning("judge report: could not store %s/%s", study.pk, judge.pk, exc_info=True)
    return stored.report


def _run_here(study_id: int, judge_id: int) -> None:
    try:
        judge_report_compute(study_id=study_id, judge_id=judge_id)
    except Exception:
        logger.exception("judge report: computing %s/%s failed", study_id, judge_id)
    finally:
        connections.close_all()


def _dispatch(study_id: int, judge_id: int) -> None:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        _local_executor().submit(_run_here, study_id, judge_id)
        return
    from celery import current_app  # by name: analysis.tasks imports this module

    transaction.on_commit(lambda: current_app.send_task(JUDGE_REPORT_TASK, args=(study_id, judge_id)))
