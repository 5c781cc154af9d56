"""Who counts towards the balance of a study: the counting rules every study kind's assignment policy uses.

* A participant holds a slot in their condition while completed, or active and seen within the study's time
  limit (`study.time_limit_minutes`); a participant past it is "stale" and counts no more. Before consent the
  hold is shorter (PARTICIPANT_CONSENT_HOLD_MINUTES): made-up ids that never get past the entry free their
  places quickly.
* An assignment is *live* (it counts towards its item's balance) when it is answered, or while its participant
  is completed or active-and-not-stale. Staff previews never count.
* Ties are broken by a hash of each id with two numbers drawn from a random generator seeded with the
  participant's stored seed (`tie_break_key` in Python, `studies_tie_break` in the enrolment statement):
  every tied condition is equally likely to come first. Tied responses are dealt from each count's own fixed
  order (`deal_order_sql`, a hash of the id and the count) from a starting point the participant draws
  (`deal_start`), so the database reads only the responses it deals (migration 0019). A participant's draws
  come in a fixed order (the condition's tie-break, then the kind's), so the whole enrolment replays from the
  seed, and a statement in the database given the same draws (migration 0013) makes the same choices.

The rules exist twice, once per way of asking: as ORM filters (`holding`, `counted_participants`,
`live_assignments`) and as SQL fragments for the hand-written enrolment queries (`holding_sql`, `counted_sql`,
`live_sql`, studies/rows.py); tests/studies/test_balancing_sql.py holds them to the same rows.

A study kind's assignment policy (studies/kinds/) builds on these; the participant lifecycle
(studies/participants.py) uses them to choose a condition.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from functools import cache

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from . import rows
from .models import Assignment, Condition, Participant, Study


def stale_cutoff(study: Study, now: datetime) -> datetime:
    return now - timedelta(minutes=study.time_limit_minutes)


def consent_cutoff(now: datetime) -> datetime:
    return now - timedelta(minutes=settings.PARTICIPANT_CONSENT_HOLD_MINUTES)


def holding(study: Study, now: datetime, prefix: str = "") -> Q:
    """Active participants whose hold on their place has not lapsed: seen within the study's time limit,
    and, before they agreed to the consent form, within PARTICIPANT_CONSENT_HOLD_MINUTES (an id that opens
    the link and goes no further frees its place quickly). `prefix` reaches them through a relation."""
    return Q(
        **{
            f"{prefix}status": Participant.Status.ACTIVE,
            f"{prefix}last_seen_at__gte": stale_cutoff(study, now),
        }
    ) & (
        ~Q(**{f"{prefix}step": Participant.Step.CONSENT})
        | Q(**{f"{prefix}last_seen_at__gte": consent_cutoff(now)})
    )


def counted_participants(study: Study, now: datetime) -> Q:
    """Participants who hold a slot: completed, or active and holding (see `holding`)."""
    return Q(status=Participant.Status.COMPLETED) | holding(study, now)


def live_assignments(study: Study, now: datetime) -> Q:
    """Assignments that count towards an item's balance: answered ones always; the others while their
    participant is completed or active-and-not-stale. Previews never count."""
    return Q(participant__is_preview=False) & (
        Q(answered_at__isnull=False)
        | Q(participant__status=Participant.Status.COMPLETED)
        | holding(study, now, prefix="participant__")
    )


# --- The same rules as SQL, for hand-written queries (studies/rows.py) ------------------------------------
#
# Each fragment is constant text for a table alias (cached: a query built from them is built once), and every
# fragment takes the same two parameters, `rules_params(study, now)`: the time-limit and consent-hold cutoffs.
# The states they compare with are the models' constants, written into the text.


def rules_params(study: Study, now: datetime) -> list:
    """The parameters of each fragment below, in its text's order: the stale cutoff, the consent cutoff."""
    adapt = connection.ops.adapt_datetimefield_value
    return [adapt(stale_cutoff(study, now)), adapt(consent_cutoff(now))]


def _literal(value: str) -> str:
    return f"'{value}'"  # the models' own state names: no quote in any


@cache
def holding_sql(vendor: str, p: str = "p") -> str:
    """`holding` over the participant row aliased `p`."""
    col = lambda name: rows.column(Participant, name, p)  # noqa: E731
    return (
        f"({col('status')} = {_literal(Participant.Status.ACTIVE)} AND {col('last_seen_at')} >= %s"
        f" AND ({col('step')} <> {_literal(Participant.Step.CONSENT)} OR {col('last_seen_at')} >= %s))"
    )


@cache
def counted_sql(vendor: str, p: str = "p") -> str:
    """`counted_participants`, previews left out, over the participant row aliased `p`."""
    return _not_preview_and(vendor, p, also="")


@cache
def live_sql(vendor: str, a: str = "a", p: str = "p") -> str:
    """`live_assignments` over the assignment row aliased `a` and its participant's row `p`."""
    return _not_preview_and(vendor, p, also=f"{rows.column(Assignment, 'answered_at', a)} IS NOT NULL OR ")


def _not_preview_and(vendor: str, p: str, *, also: str) -> str:
    col = lambda name: rows.column(Participant, name, p)  # noqa: E731
    completed = f"{col('status')} = {_literal(Participant.Status.COMPLETED)}"
    return f"(NOT {col('is_preview')} AND ({also}{completed} OR {holding_sql(vendor, p)}))"


@cache
def lapsed_sql(vendor: str, p: str = "p") -> str:
    """Active participants whose hold has lapsed (the ones `participants_release_stale` times out)."""
    status = rows.column(Participant, "status", p)
    return f"({status} = {_literal(Participant.Status.ACTIVE)} AND NOT {holding_sql(vendor, p)})"


def condition_choose(
    study: Study, kind, external_id: str, *, rng: random.Random, is_preview: bool, now: datetime
) -> tuple[Condition | None, int | None, bool]:
    """For an enrolment, under the study's lock: the condition a newcomer joins (None: the study is full),
    the id of a participant who already has `external_id` (None: nobody), and whether the study has stale
    participants to release. The least filled of the enrolling conditions that `kind` (the study's kind)
    finds enrollable and that are below their quota (previews: any), ties by `tie_break_key` with the first
    two draws of `rng` (drawn whatever the outcome, so the kind's draws that follow are always the same ones).

    One query: the study's enrolling conditions, each with its counted participants and whether the kind
    finds it enrollable (`StudyKind.enrollable_sql`), with the id's look-up and the staleness check as
    columns of every row (one row of NULL conditions when there is none)."""
    draws = tie_break_draws(rng)
    vendor = connection.vendor
    rules = rules_params(study, now)
    found = rows.fetchall(
        _choose_sql(vendor, kind.enrollable_sql(vendor)),
        [study.pk, *rules, study.pk, external_id, study.pk, *rules, study.pk],
    )
    conditions, counts = {}, {}
    for row in found:
        condition, end = rows.instance(Condition, row)
        if condition.pk is not None and row[end + 3]:
            condition.study = study
            conditions[condition.pk] = condition
            counts[condition.pk] = row[end]
    existing_id, stale = row[end + 1], bool(row[end + 2])
    if existing_id is not None or not conditions:
        return None, existing_id, stale
    if not is_preview:
        conditions = {cid: c for cid, c in conditions.items() if counts[cid] < c.effective_quota}
    if not conditions:
        return None, None, stale
    chosen = min(conditions, key=lambda cid: (counts[cid], tie_break_key(cid, draws), cid))
    return conditions[chosen], None, stale


@cache
def _choose_sql(vendor: str, enrollable: str) -> str:
    """`enrollable`: the kind's condition on the condition row `c` (`StudyKind.enrollable_sql`)."""
    p = lambda name: rows.column(Participant, name, "p")  # noqa: E731
    c = lambda name: rows.column(Condition, name, "c")  # noqa: E731
    participants = rows.table(Participant)
    return (
        f"SELECT {rows.columns(Condition, 'c')},"
        f" (SELECT COUNT(*) FROM {participants} p"
        f" WHERE {p('study')} = %s AND {p('condition')} = {c('id')} AND {counted_sql(vendor)}),"
        f" (SELECT {p('id')} FROM {participants} p WHERE {p('study')} = %s AND {p('external_id')} = %s),"
        f" EXISTS (SELECT 1 FROM {participants} p WHERE {p('study')} = %s AND {lapsed_sql(vendor)}),"
        f" {enrollable}"
        f" FROM (SELECT 1 AS one) one LEFT JOIN {rows.table(Condition)} c"
        f" ON {c('study')} = %s AND {c('enrolling')} ORDER BY {c('id')}"
    )


def condition_counts(*, study: Study, now: datetime | None = None) -> dict[int, int]:
    """Participants holding a slot, per condition id (every condition of the study, zeros included)."""
    now = now or timezone.now()
    return dict(
        rows.fetchall(_condition_counts_sql(connection.vendor), [*rules_params(study, now), study.pk])
    )


@cache
def _condition_counts_sql(vendor: str) -> str:
    c_id = rows.column(Condition, "id", "c")
    return (
        f"SELECT {c_id}, (SELECT COUNT(*) FROM {rows.table(Participant)} p"
        f" WHERE {rows.column(Participant, 'condition', 'p')} = {c_id} AND {counted_sql(vendor)})"
        f" FROM {rows.table(Condition)} c WHERE {rows.column(Condition, 'study', 'c')} = %s"
    )


def fewest_first(counts: dict[int, int], rng: random.Random) -> list[int]:
    """Keys ordered by count, ties in random order."""
    keys = sorted(counts)  # a fixed starting order, so the draw depends only on the seed and the counts
    rng.shuffle(keys)
    return sorted(keys, key=lambda key: counts[key])  # stable sort keeps the random order within ties


# Two rounds of (x XOR seed) * odd constant mod a prime below 2**32: with ids and seeds below 2**31, every
# product stays below 2**63 (PostgreSQL's bigint, SQLite's integer). XOR is written (a | b) - (a & b), which
# both databases know.
_HASH_PRIME = 4294967291
_HASH_ROUNDS = (2654435761, 1597334677)


def tie_break_sql(id_sql: str, draws_sql: tuple[str, str]) -> str:
    """An SQL expression ordering rows that tie on a count: a hash of the id (`id_sql`) with two numbers, given as
    SQL (`draws_sql`: literals or expressions of the row); `tie_break_key` computes the same in Python. Put the
    id after it in ORDER BY (a hash collision then falls back to the id)."""
    expression = id_sql
    for draw, multiplier in zip(draws_sql, _HASH_ROUNDS, strict=True):
        expression = (
            f"(((({expression}) | {draw}) - (({expression}) & {draw})) * {multiplier}) %% {_HASH_PRIME}"
        )
    return expression


# The fixed second number of every count's order of the responses in the deal (migration 0019).
DEAL_ORDER_SALT = 1540483477


def deal_order_sql(id_sql: str, count_sql: str) -> str:
    """An SQL expression (no parameters) giving response `id_sql` its place among the responses with
    `count_sql` live pages: `tie_break_sql` with the count and `DEAL_ORDER_SALT` for the two numbers, so each
    count has its own fixed order, kept by an index on PostgreSQL (`responsetally_deal_order`)."""
    return tie_break_sql(id_sql, (f"({count_sql})", str(DEAL_ORDER_SALT)))


def deal_start(draws: tuple[int, ...]) -> int:
    """Where in each count's order a participant's deal starts: the hash of 0 with their two draws."""
    return tie_break_key(0, draws)


def tie_break_draws(rng: random.Random) -> tuple[int, ...]:
    """The two numbers one tie-break draws from `rng`."""
    return tuple(rng.getrandbits(31) for _ in _HASH_ROUNDS)


def tie_break_key(value: int, draws: tuple[int, ...]) -> int:
    """`tie_break_sql` computed in Python, for the two numbers `draws` (`tie_break_draws`)."""
    for draw, multiplier in zip(draws, _HASH_ROUNDS, strict=True):
        value = ((value ^ draw) * multiplier) % _HASH_PRIME
    return value


# --- The responses' tallies (studies/balance_models.py) ---------------------------------------------------

_TALLY_FILL = (
    "INSERT INTO studies_responsetally (response_id, live_assignments, condition_id, eligible)"
    " SELECT r.id, COALESCE(n.n, 0), r.condition_id, r.sample_index = 0 AND r.review <> 'flagged'"
    " FROM studies_response r LEFT JOIN (SELECT a.response_id, count(*) AS n FROM studies_assignment a"
    " JOIN studies_participant p ON p.id = a.participant_id"
    " WHERE a.kind = 'response' AND NOT p.is_preview GROUP BY a.response_id) n ON n.response_id = r.id"
)


def response_tallies_rebuild() -> tuple[int, int]:
    """Counts every response's pages again into `ResponseTally`, as its triggers count them (migration 0010),
    one row for every response with its condition and whether it may be dealt (migration 0018): the repair
    after anything that bypassed them (a TRUNCATE, a restore without triggers). Returns the number of tallies
    that were wrong (missing ones included) and the number of responses.

    Safe while a study runs: on PostgreSQL the tally table is locked (EXCLUSIVE: reads go on, writers wait)
    before the count, so pages whose transactions are still open are waited for, and the pages added after it
    wait to be counted on top of it; SQLite writes one transaction at a time."""
    return _rebuild(
        "studies_responsetally", "response_id", "live_assignments, eligible, condition_id", _TALLY_FILL, None
    )


def _rebuild(table: str, key: str, columns: str, fill: str, missing) -> tuple[int, int]:
    """Empties the tally `table` (its `key` and the tallied `columns`) and fills it again by the query `fill`,
    locked on PostgreSQL; returns how many rows were wrong (a missing row reads as `missing`) and how many rows
    it now has."""
    select = f"SELECT {key}, {columns} FROM {table}"
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
        cursor.execute(select)
        before = {k: tuple(v) for k, *v in cursor.fetchall()}
        cursor.execute(f"DELETE FROM {table}")
        cursor.execute(fill)
        cursor.execute(select)
        after = {k: tuple(v) for k, *v in cursor.fetchall()}
    wrong = sum(before.get(k, missing) != v for k, v in after.items()) + sum(
        v != missing for k, v in before.items() if k not in after
    )
    return wrong, len(after)


_CONDITION_TALLY_FILL = (
    "INSERT INTO studies_conditiontally (condition_id, completed) SELECT p.condition_id, count(*)"
    " FROM studies_participant p WHERE p.status = 'completed' AND NOT p.is_preview"
    " AND p.condition_id IS NOT NULL GROUP BY p.condition_id"
)


def condition_tallies_rebuild() -> tuple[int, int]:
    """Counts every condition's completed participants again into `ConditionTally`, as its triggers count them
    (migration 0016), on PostgreSQL (SQLite keeps no such tally): the repair after anything that bypassed them.
    Returns the number of tallies that were wrong and the number of conditions with completed participants.
    Safe while a study runs, as `response_tallies_rebuild` is: the table is locked before the count."""
    if connection.vendor != "postgresql":
        return 0, 0
    return _rebuild("studies_conditiontally", "condition_id", "completed", _CONDITION_TALLY_FILL, (0,))
