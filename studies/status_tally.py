"""The live status page's counts of participants (by condition and status, flagged for failed attention checks,
flagged by the authenticity verdict), read from running tallies so that they cost the same whatever the study's
size.

Database triggers (migration 0019) append a `StatusDelta` in the transaction of every change to what is counted,
whatever writes it (the participant services, bulk status updates, imports, the admin): appending waits on no
other transaction. A reader first folds the study's deltas into its `StatusTally` rows and then reads them: the
fold costs the changes since the last look. On PostgreSQL the fold is one statement: the deltas it deletes are the
ones it adds, a concurrent fold skips the rows another deleted, and both add to the tally rows in key order, so
two never wait on each other in opposite orders.
"""

from __future__ import annotations

from collections import defaultdict

from django.db import connection, transaction

from .models import StatusDelta, StatusTally

_KEY = ("study_id", "condition_id", "status", "flagged", "unauthentic")


def _fold_postgresql(study_id: int) -> None:
    key = ", ".join(_KEY)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH moved AS (DELETE FROM {StatusDelta._meta.db_table} WHERE study_id = %s RETURNING {key}, n) "
            f"INSERT INTO {StatusTally._meta.db_table} ({key}, n) "
            f"SELECT {key}, SUM(n) FROM moved GROUP BY {key} ORDER BY {key} "
            f"ON CONFLICT ({key}) DO UPDATE SET n = {StatusTally._meta.db_table}.n + EXCLUDED.n",
            [study_id],
        )


def _fold_portable(study_id: int) -> None:
    """SQLite (`make run`): writes are serialised by the database, so read, add, delete what was read."""
    deltas = list(StatusDelta.objects.filter(study_id=study_id).values_list("pk", *_KEY[1:], "n"))
    sums: dict[tuple, int] = defaultdict(int)
    for _pk, *key, n in deltas:
        sums[tuple(key)] += n
    for (condition_id, status, flagged, unauthentic), n in sorted(sums.items()):
        tally, _ = StatusTally.objects.get_or_create(
            study_id=study_id,
            condition_id=condition_id,
            status=status,
            flagged=flagged,
            unauthentic=unauthentic,
        )
        StatusTally.objects.filter(pk=tally.pk).update(n=tally.n + n)
    StatusDelta.objects.filter(pk__in=[row[0] for row in deltas]).delete()


def status_tallies(study_id: int) -> list[tuple[int | None, str, bool, bool, int]]:
    """[(condition id or None, status or "", flagged, unauthentic, participants)] of the study, up to date
    (see StatusTally for what each row counts)."""
    if connection.vendor == "postgresql":
        _fold_postgresql(study_id)
    else:
        with transaction.atomic():
            _fold_portable(study_id)
    found = StatusTally.objects.filter(study_id=study_id).exclude(n=0).order_by()
    return [(c or None, s, f, u, n) for c, s, f, u, n in found.values_list(*_KEY[1:], "n")]
