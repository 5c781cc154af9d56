"""Exports of large studies as files written by a worker, so that no request holds a web process for the minutes a
million rows take to write, and the download is a plain read of stored bytes.

- `export_as_file(study)`: whether the study's exports go through a file (more than EXPORT_FILE_ABOVE_PARTICIPANTS
  participants, read from the status page's running tallies, so the question costs the same at any size);
- `export_file_request`: asks for a file of one export (the same exports, columns and exclusion rules as the
  streamed download: `analysis.exports.export_lines` writes both). At most one file of the same export is being
  prepared at a time (a database constraint): a second request, concurrent or not, gets the first one;
- `export_file_write`: the worker's side. It claims the file once (queued → running), writes the export to a
  temporary file on the worker (memory flat), then stores it in parts with the file marked ready, in one
  transaction: a failure leaves no part and the file marked failed with the error;
- `export_file_pieces`: the stored bytes, one part at a time.

The bytes are kept in PostgreSQL (`ExportFilePart`), not on a disk: every replica serves any file, and production
needs no file storage for them. Files older than EXPORT_FILE_KEEP_DAYS are deleted when a new one is asked for.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from analysis import exports, snapshots
from analysis.exclusions import ExclusionRules
from analysis.models import ExportFile, ExportFilePart
from studies.models import Study
from studies.status_tally import status_tallies

PART_BYTES = 8 * 1024 * 1024
EXPORT_FILE_TASK = "analysis.tasks.export_file_task"
RUNNING_SECONDS = (
    3600  # the task's hard time limit: a file still `running` after it was left by a dead worker
)
IN_PROGRESS = (ExportFile.State.QUEUED, ExportFile.State.RUNNING)


def export_as_file(study: Study) -> bool:
    """True when the study's exports are prepared as files rather than streamed in the request."""
    participants = sum(row[-1] for row in status_tallies(study.pk))
    return participants > settings.EXPORT_FILE_ABOVE_PARTICIPANTS


def export_file_latest(*, study: Study, what: str, no_exclusions: bool, pseudonymised: bool) -> dict:
    """The newest ready file of this export and the one being prepared, if any: {"ready": …, "pending": …}."""
    files = ExportFile.objects.filter(
        study=study, what=what, no_exclusions=no_exclusions, pseudonymised=pseudonymised
    )
    return {
        "ready": files.filter(state=ExportFile.State.READY).first(),
        "pending": files.filter(state__in=IN_PROGRESS).first(),
    }


def _abandoned_fail(**export) -> None:
    """A file left `running` past the task's time limit (its worker died): failed, so a new one can be asked."""
    ExportFile.objects.filter(
        **export,
        state=ExportFile.State.RUNNING,
        started_at__lt=timezone.now() - timedelta(seconds=RUNNING_SECONDS),
    ).update(
        state=ExportFile.State.FAILED, error="The worker writing it stopped.", finished_at=timezone.now()
    )


def export_file_request(
    *, study: Study, what: str, no_exclusions: bool, pseudonymised: bool, user=None
) -> ExportFile:
    """A file of one export of `study` being prepared: a new one, or the one already queued or running.
    Raises exports.ExportError for an export the study does not have."""
    if what not in exports.export_names(study):
        raise exports.ExportError(
            f"unknown export {what!r}: choose one of {', '.join(exports.export_names(study))}"
        )
    export = {"study": study, "what": what, "no_exclusions": no_exclusions, "pseudonymised": pseudonymised}
    _abandoned_fail(**export)
    ExportFile.objects.filter(
        study=study, finished_at__lt=timezone.now() - timedelta(days=settings.EXPORT_FILE_KEEP_DAYS)
    ).delete()
    try:
        with transaction.atomic():
            file = ExportFile.objects.create(**export, requested_by=user)
    except IntegrityError:  # one is queued or running: join it
        return ExportFile.objects.get(**export, state__in=IN_PROGRESS)
    transaction.on_commit(lambda: _dispatch(file.pk))
    return file


def _dispatch(file_id: int) -> None:
    if settings.CELERY_TASK_ALWAYS_EAGER:  # no broker (`make run`): the server's background thread writes it
        snapshots.local_submit(lambda: export_file_write(file_id))
        return
    # By name: analysis.tasks imports this module (no import cycle), and the task is registered on the workers.
    from celery import current_app

    current_app.send_task(EXPORT_FILE_TASK, args=(file_id,))


def _claim(file_id: int) -> bool:
    return bool(
        ExportFile.objects.filter(pk=file_id, state=ExportFile.State.QUEUED).update(
            state=ExportFile.State.RUNNING, started_at=timezone.now()
        )
    )


def export_file_write(file_id: int) -> ExportFile | None:
    """Write one queued file (None when it is not queued: another worker has it, or it is done)."""
    if not _claim(file_id):
        return None
    file = ExportFile.objects.select_related("study").get(pk=file_id)
    try:
        with tempfile.TemporaryFile() as spool:
            rules = ExclusionRules.none() if file.no_exclusions else None
            lines = exports.export_lines(
                study=file.study, what=file.what, rules=rules, reveal_participant_ids=not file.pseudonymised
            )
            # The export's own connection may be busy with its COPY until the last line: write the parts after.
            for line in lines:
                spool.write(line.encode())
            size = spool.tell()
            spool.seek(0)
            with transaction.atomic():
                index = 0
                while data := spool.read(PART_BYTES):
                    ExportFilePart.objects.create(file=file, index=index, data=data)
                    index += 1
                ExportFile.objects.filter(pk=file.pk).update(
                    state=ExportFile.State.READY, rows=lines.rows, size=size, finished_at=timezone.now()
                )
    except Exception as exc:
        ExportFile.objects.filter(pk=file.pk).update(
            state=ExportFile.State.FAILED, error=str(exc)[:2000], finished_at=timezone.now()
        )
        raise
    file.refresh_from_db()
    return file


def export_file_pieces(file: ExportFile) -> Iterator[bytes]:
    """The file's bytes, one stored part at a time (memory: one part)."""
    indexes = list(file.parts.order_by("index").values_list("index", flat=True))
    for index in indexes:
        yield bytes(ExportFilePart.objects.values_list("data", flat=True).get(file=file, index=index))
