"""Each participant's flags under their study's declared exclusion rules, kept so that the live status page reads
the flagged participants without reading every rating of the study.

The flags are computed by the study kind's `exclusion_flags` capability (the analysis's own computation: for the
rating kind, `participant_exclusion_flags` on the participant's counted ratings), never by a second copy of a
rule. What changes is when: database triggers mark a participant stale (`FlagsStale`) whenever anything the rules
read changes (their ratings, status, attention-check failures, attention flag, preview mark, authenticity verdict,
or the study's declared rules: migration 0018), in the transaction that changes it, on every path that writes (the
answer services, bulk status updates, imports, the admin). `flags_refresh` computes the marked participants of a
study again and stores who is excluded (`DeclaredFlags`), so a look at the page costs the participants who changed
since the last look, not the study's size.

Concurrency: a mark is renewed with a new `seq` when its participant changes again; a refresh deletes only the
(participant, seq) marks it read, after computing from rows at least as new as those marks, so a change committed
meanwhile keeps its mark and is computed next time. Refreshes of one study take turns (a PostgreSQL advisory lock,
never the study's row, which enrolment locks), so an older computation never overwrites a newer one.
"""

from __future__ import annotations

from django.db import connection, transaction

from .kinds import kind_of
from .kinds.base import resolved
from .models import DeclaredFlags, FlagsStale, Participant, Study

REFRESH_BATCH = 2000
# More marked participants than this (a bulk load, the first look after the migration): the study's flags are
# computed in one pass over its rows, as the analysis does, rather than batch by batch.
WHOLE_STUDY_ABOVE = 5 * REFRESH_BATCH
_LOCK_SPACE = 0x464C4147  # "FLAG": the advisory locks of this module, keyed by study id


def _refresh_lock(study_id: int) -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_SPACE, study_id])


def _marks_delete(marks: list[tuple[int, int]]) -> None:
    quote = connection.ops.quote_name
    pairs = ", ".join(["(%s, %s)"] * len(marks))
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {quote(FlagsStale._meta.db_table)} "
            f"WHERE ({quote('participant_id')}, {quote('seq')}) IN (VALUES {pairs})",
            [value for mark in marks for value in mark],
        )


def _store(study_id: int, flags: dict[int, list[str]]) -> None:
    """Stores the excluded among `flags` ({participant id: rules in words}; [] kept)."""
    DeclaredFlags.objects.bulk_create(
        [
            DeclaredFlags(participant_id=pid, study_id=study_id, rules=rules)
            for pid, rules in flags.items()
            if rules
        ],
        batch_size=REFRESH_BATCH,
    )


def flags_refresh(study: Study) -> int:
    """Computes again the flags of the study's participants marked stale and stores them; returns how many
    participants it computed. A kind without declared rules (no `exclusion_flags`) has no flags: its marks are
    dropped."""
    if not FlagsStale.objects.filter(study_id=study.pk).exists():  # the common case: nobody changed
        return 0
    with transaction.atomic():
        _refresh_lock(study.pk)
        study = Study.objects.get(pk=study.pk)  # its rules as stored now, whatever the caller's copy says
        path = kind_of(study).exclusion_flags
        marks = list(
            FlagsStale.objects.filter(study_id=study.pk)
            .order_by("participant_id")
            .values_list("participant_id", "seq")
        )
        if path is not None and len(marks) > WHOLE_STUDY_ABOVE:  # a bulk load: one pass over the study
            DeclaredFlags.objects.filter(study_id=study.pk).delete()
            _store(study.pk, resolved(path)(study=study))
            for start in range(0, len(marks), REFRESH_BATCH):
                _marks_delete(marks[start : start + REFRESH_BATCH])
            return len(marks)
        for start in range(0, len(marks), REFRESH_BATCH):
            batch = marks[start : start + REFRESH_BATCH]
            ids = [pid for pid, _ in batch]
            flags: dict[int, list[str]] = {}
            if path is not None:
                counted = Participant.objects.filter(pk__in=ids, study=study, is_preview=False).order_by()
                mine = dict.fromkeys(counted.values_list("pk", flat=True), study)
                flags = resolved(path)(participants=mine) if mine else {}
            DeclaredFlags.objects.filter(participant_id__in=ids).delete()
            _store(study.pk, flags)
            _marks_delete(batch)
    return len(marks)


def flagged_by_rules(study: Study) -> dict[int, list[str]]:
    """{participant id: the declared rules that exclude them, in words} for every participant of the study
    whom a declared rule excludes (the kept are missing), up to date: the stale are computed first."""
    flags_refresh(study)
    return dict(DeclaredFlags.objects.filter(study_id=study.pk).values_list("participant_id", "rules"))
