"""Celery tasks of the analysis: thin doors into `analysis.snapshots`. They take ids and are idempotent (a
snapshot already computed on the current data is kept)."""

from celery import shared_task

from analysis import export_files, judge_ahead, snapshots


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=540, time_limit=snapshots.RUNNING_SECONDS)
def analysis_snapshot_task(study_id: int, baseline: str | None = None, no_exclusions: bool = False) -> bool:
    """Compute the dashboard's analysis of one study under one set of options and keep it in the cache."""
    return (
        snapshots.snapshot_compute(study_id=study_id, baseline=baseline, no_exclusions=no_exclusions)
        is not None
    )


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=50, time_limit=60)
def analysis_refresh_live_task() -> int:
    """Run by beat: ask for a fresh analysis (declared exclusions and none) of every live or closed study whose
    data changed since its last snapshots (`snapshots.snapshots_refresh`), so the dashboard is current before
    anyone opens it. Returns how many were asked for."""
    return snapshots.snapshots_refresh()


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=540, time_limit=judge_ahead.RUNNING_SECONDS)
def judge_report_task(study_id: int, judge_id: int) -> bool:
    """Compute one judge's report on one study and keep it in the cache (the judge report page asks for it)."""
    return judge_ahead.judge_report_compute(study_id=study_id, judge_id=judge_id) is not None


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=50, time_limit=60)
def judge_reports_refresh_task() -> int:
    """Run by beat: ask for a new report of every judge whose study's data or ratings changed since its last one."""
    return judge_ahead.judge_reports_refresh()


@shared_task(
    acks_late=True, ignore_result=True, soft_time_limit=3540, time_limit=export_files.RUNNING_SECONDS
)
def export_file_task(file_id: int) -> bool:
    """Write one export file a researcher asked for (analysis.export_files); False when it was not queued."""
    return export_files.export_file_write(file_id) is not None
