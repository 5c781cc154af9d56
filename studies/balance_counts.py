"""Running totals for the balance, so that an enrolment's cost does not grow with the study.

The balance rule (studies/balancing.py) counts, per condition, the participants who hold a slot, and per item
the live pages showing it. Counting them from the rows costs more with every participant. Instead each study
keeps `BalanceCount` rows, changed in the same transaction as the rows they count:

* per condition: non-preview participants who are active or completed (+1 at enrolment, -1 when one is
  released: returned, timed out, screened out);
* per page target (scope the page's kind, key its response or situation id): non-preview assignment pages
  that exist (+1 when enrolment writes one, -1 when a release deletes an unanswered one).

Those are the rule's counts but for one term of time: an active participant stops holding a slot the moment
their hold lapses, before anyone releases them. `lapsed_conditions` and `lapsed_pages` find those participants
and their pages through the index of active participants (a handful, whatever the study's size), and the
readers subtract them. Bulk writes (imports, deleting participants in the admin) call `counts_rebuild`, which
counts everything again under the study's lock.

Increments are one statement (`INSERT ... ON CONFLICT DO UPDATE`) with keys in a fixed order, so two
transactions touching the same totals lock them in the same order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from functools import cache

from django.db import connection
from django.db.models import Count, F, Q, QuerySet

from . import rows
from .balancing import lapsed
from .models import Assignment, BalanceCount, Participant, Study

CONDITION = "condition"
COUNTED_STATUSES = (Participant.Status.ACTIVE, Participant.Status.COMPLETED)
_TARGETS = ("response", "situation")


def _page_key(page: Assignment) -> tuple[str, int] | None:
    for target in _TARGETS:
        value = getattr(page, f"{target}_id")
        if value is not None:
            return page.kind, value
    return None


def counts_add(study_id: int, deltas: dict[tuple[str, int], int]) -> None:
    """Adds `deltas` ({(scope, key): n}) to the study's totals, creating the missing ones."""
    deltas = {key: n for key, n in deltas.items() if n}
    if not deltas:
        return
    keys = sorted(deltas)
    values = ", ".join(["(%s, %s, %s, %s)"] * len(keys))
    params = [p for scope, key in keys for p in (study_id, scope, key, deltas[scope, key])]
    quote = connection.ops.quote_name
    tbl = rows.table(BalanceCount)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {tbl} ({quote('study_id')}, {quote('scope')}, {quote('key')}, {quote('count')}) "
            f"VALUES {values} ON CONFLICT ({quote('study_id')}, {quote('scope')}, {quote('key')}) "
            f"DO UPDATE SET {quote('count')} = {tbl}.{quote('count')} + EXCLUDED.{quote('count')}",
            params,
        )


def counts_get(study_id: int, scope: str) -> dict[int, int]:
    """{key: total} of one scope of the study (keys never counted are missing: zero)."""
    found = BalanceCount.objects.filter(study_id=study_id, scope=scope).order_by()
    return dict(found.values_list("key", "count"))


def enrolled(participant: Participant, pages: Iterable) -> None:
    """A new non-preview participant and the pages enrolment wrote for them (Assignment pages counted; other
    kinds of page, such as pairwise items, are not)."""
    deltas = Counter({(CONDITION, participant.condition_id): 1})
    deltas.update(key for page in pages if isinstance(page, Assignment) and (key := _page_key(page)))
    counts_add(participant.study_id, deltas)


def released(participant_ids: list[int]) -> None:
    """Deletes the unanswered pages of these participants, whom the caller has just moved from active to a
    status that holds no slot, and takes them and those pages off the totals."""
    found = Participant.objects.filter(pk__in=participant_ids).order_by()
    people = list(found.values_list("study_id", "condition_id", "is_preview"))
    pages = Assignment.objects.filter(participant_id__in=participant_ids, answered_at__isnull=True)
    counted = list(
        pages.filter(participant__is_preview=False).values_list("participant__study_id", *_PAGE_COLUMNS)
    )
    pages.delete()
    per_study: dict[int, Counter] = {}
    for study_id, condition_id, is_preview in people:
        if not is_preview:
            per_study.setdefault(study_id, Counter())[CONDITION, condition_id] -= 1
    for study_id, kind, *targets in counted:
        target = next((t for t in targets if t is not None), None)
        if target is not None:
            per_study.setdefault(study_id, Counter())[kind, target] -= 1
    for study_id in sorted(per_study):
        counts_add(study_id, per_study[study_id])


_PAGE_COLUMNS = ("kind", *(f"{target}_id" for target in _TARGETS))


def holding(study: Study, now: datetime) -> tuple[dict[int, int], bool]:
    """{condition id: participants holding a slot} by the balance rule (studies/balancing.py
    `counted_participants`), from the totals less the lapsed; and whether anyone in the study (staff previews
    too) has lapsed and awaits release. Two queries, neither growing with the study."""
    totals = counts_get(study.pk, CONDITION)
    found = Participant.objects.filter(study=study).filter(lapsed(study, now)).order_by()
    stale = False
    for condition_id, is_preview, n in found.values_list("condition_id", "is_preview").annotate(
        n=Count("pk")
    ):
        stale = True
        if not is_preview:
            totals[condition_id] = totals.get(condition_id, 0) - n
    return totals, stale


def live_pages(study: Study, now: datetime, kind: str, targets: QuerySet) -> dict[int, int]:
    """{target id: live pages} of the `kind` pages showing each of `targets` (rows whose key is the target's
    id; zeros included), by the balance rule (studies/balancing.py `live_assignments`): the totals, read with
    the targets in one query, less the unanswered pages of lapsed participants (one more).

    The first query joins the totals to the targets' own SQL by hand: the ORM's correlated subquery ran a value
    converter on each of the condition's thousands of rows, most of an enrolment's Python time
    (`bench/request_costs.py --profile entry`)."""
    targets_sql, params = targets.order_by().values(target=F("pk")).query.sql_with_params()
    counts = dict(rows.fetchall(_live_pages_sql(connection.vendor, targets_sql), [*params, study.pk, kind]))
    target = "situation" if kind == Assignment.Kind.SITUATION else "response"
    people = Participant.objects.filter(study=study, is_preview=False).filter(lapsed(study, now))
    unanswered = (
        Assignment.objects.filter(participant__in=people, kind=kind, answered_at__isnull=True)
        .order_by()
        .values_list(target)
        .annotate(n=Count("pk"))
    )
    for key, n in unanswered:
        if key in counts:
            counts[key] -= n
    return counts


@cache
def _live_pages_sql(vendor: str, targets_sql: str) -> str:
    b = lambda name: rows.column(BalanceCount, name, "b")  # noqa: E731
    return (
        f"SELECT t.target, COALESCE({b('count')}, 0) FROM ({targets_sql}) t"
        f" LEFT JOIN {rows.table(BalanceCount)} b"
        f" ON {b('study')} = %s AND {b('scope')} = %s AND {b('key')} = t.target"
    )


def counts_rebuild(study: Study) -> None:
    """Counts the study's totals again from its rows, under the study's lock (after bulk writes)."""
    rows.select(Study, ("id",), [study.pk], lock=True)
    deltas: Counter = Counter()
    people = Participant.objects.filter(study=study, is_preview=False, status__in=COUNTED_STATUSES).order_by()
    for condition_id, n in people.values_list("condition_id").annotate(n=Count("pk")):
        deltas[CONDITION, condition_id] = n
    pages = Assignment.objects.filter(participant__study=study, participant__is_preview=False).exclude(
        Q(response__isnull=True) & Q(situation__isnull=True)
    )
    for kind, response, situation, n in pages.order_by().values_list(*_PAGE_COLUMNS).annotate(n=Count("pk")):
        deltas[kind, response if response is not None else situation] += n
    BalanceCount.objects.filter(study=study).delete()
    counts_add(study.pk, deltas)
