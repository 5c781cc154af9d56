"""The ratings export on PostgreSQL: `COPY (SELECT …) TO STDOUT WITH CSV`, with the formula neutralisation, the
pseudonyms, the scale labels and the exclusion flags computed in SQL.

The Python path (`analysis.exports.rating_export_records` through `csv_lines`) builds every cell in Python: about
five times PostgreSQL's own COPY of the same rows. Here PostgreSQL writes the CSV itself, in blocks of
participants (a COPY per block, keyset on the participant id), so memory stays bounded by one block's text and the
first bytes leave before the last block is read. Both paths give the same cells; a test holds them together.

The SQL mirrors, cell by cell:
- `exports.cell_neutralise`: text starting with = + - @ TAB CR gets a leading apostrophe; numbers stay numbers;
  booleans are true/false; NULL is an empty cell; timestamps are `datetime.isoformat()` in UTC;
- `stats.participant_exclusion_flags_one`: flagged for attention checks, median response time (NULL times left
  out, no times: never too fast) below the threshold, the same value for all of at least N items.
Rules this SQL does not know (a rule added to `stats.ExclusionRules`) send the export down the Python path:
`sql_export_supported` checks the rules' fields and the flag columns, so a new rule can never be silently dropped.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator

from django.db import connection
from django.db.models import F

from analysis import selectors, stats
from studies.models import Participant, Study

# Participants per COPY: about 10 ratings each, so a block is tens of thousands of rows (a few MB of text).
BLOCK_PARTICIPANTS = 5000

KNOWN_RULE_FIELDS = ("attention_checks", "min_median_response_ms", "straight_lining_min_items")
KNOWN_FLAG_COLUMNS = [
    "excluded",
    "excluded_attention_checks",
    "excluded_too_fast",
    "excluded_straight_lining",
]
TEXT_FIELDS = frozenset(
    {
        "participant",
        "participant_status",
        "condition",
        "dialogue_id",
        "emotion",
        "valence",
        "situation",
        "speaker_utterance",
        "response_text",
    }
)
BOOL_FIELDS = frozenset({"flagged_for_exclusion"})
TIME_FIELDS = frozenset({"rated_at"})
TRIGGERS_SQL = "('=', '+', '-', '@', chr(9), chr(13))"


def sql_export_supported(*, rules: stats.ExclusionRules, flag_columns: list[str]) -> bool:
    """True when PostgreSQL can write this export: the database is PostgreSQL and the exclusion rules and flag
    columns are exactly the ones this module translates to SQL."""
    if connection.vendor != "postgresql":
        return False
    fields = tuple(f.name for f in dataclasses.fields(rules))
    return fields == KNOWN_RULE_FIELDS and list(flag_columns) == KNOWN_FLAG_COLUMNS


def _text(expr: str) -> str:
    return f"CASE WHEN left({expr}, 1) IN {TRIGGERS_SQL} THEN '''' || {expr} ELSE {expr} END"


def _bool(expr: str) -> str:
    return f"CASE WHEN {expr} THEN 'true' WHEN NOT {expr} THEN 'false' END"


def _iso(expr: str) -> str:
    """`datetime.isoformat()` of an aware UTC datetime: microseconds only when not zero."""
    utc = f"({expr} AT TIME ZONE 'UTC')"
    return (
        f"to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS') || CASE WHEN mod(extract(microseconds FROM {utc})::bigint, "
        f"1000000) <> 0 THEN to_char({utc}, '.US') ELSE '' END || '+00:00'"
    )


def _flag_sql(rules: stats.ExclusionRules) -> tuple[list[str], list]:
    """SQL for (excluded, attention_checks, too_fast, straight_lining) over the per-participant aggregate `f`."""
    params: list = []
    attention = "f.flagged" if rules.attention_checks else "false"
    if rules.min_median_response_ms is not None:
        too_fast = "COALESCE(f.median_ms < %s, false)"
        params.append(float(rules.min_median_response_ms))
    else:
        too_fast = "false"
    if rules.straight_lining_min_items is not None:
        straight = "(f.n >= %s AND f.n_distinct = 1)"
        params.append(int(rules.straight_lining_min_items))
    else:
        straight = "false"
    # Parameters in the order they appear: excluded (all three), then each flag again.
    order = [attention, too_fast, straight]
    sqls = [f"({' OR '.join(order)})", *order]
    ordered_params = params + params
    return [f"CASE WHEN {s} THEN 'true' ELSE 'false' END" for s in sqls], ordered_params


def _block_sql(
    *,
    study: Study,
    rules: stats.ExclusionRules,
    labels: dict[int, str],
    pseudonymise: bool,
    low: int,
    high: int,
) -> tuple[str, list]:
    fields = list(selectors.RATING_EXPORT_FIELDS)
    base = (
        selectors.rating_queryset(study=study)
        .filter(assignment__participant_id__gte=low, assignment__participant_id__lt=high)
        .order_by()
        .values(**{f"x_{name}": F(path) for name, path in selectors.RATING_EXPORT_FIELDS.items()})
    )
    inner, inner_params = base.query.sql_with_params()
    out: list[str] = []
    params: list = []
    for name in fields:
        col = f"r.x_{name}"
        if name == "participant" and pseudonymise:
            out.append("'P' || r.x_participant_id")
        elif name in TEXT_FIELDS:
            out.append(_text(col))
        elif name in BOOL_FIELDS:
            out.append(_bool(col))
        elif name in TIME_FIELDS:
            out.append(_iso(col))
        else:
            out.append(col)
        if name == "value":
            cases = " ".join("WHEN %s THEN %s" for _ in labels)
            out.append(f"CASE r.x_value {cases} END" if labels else "NULL")
            for value, label in labels.items():
                params += [value, label]
    flags, flag_params = _flag_sql(rules)
    sql = (
        f"WITH r AS ({inner}), f AS (SELECT x_participant_id AS pid, bool_or(x_flagged_for_exclusion) AS flagged, "
        "percentile_cont(0.5) WITHIN GROUP (ORDER BY x_response_time_ms) AS median_ms, count(*) AS n, "
        "count(DISTINCT x_value) AS n_distinct FROM r GROUP BY x_participant_id) "
        f"SELECT {', '.join(out)}, {', '.join(flags)} FROM r JOIN f ON f.pid = r.x_participant_id "
        "ORDER BY r.x_participant_id, r.x_position"
    )
    return sql, [*inner_params, *params, *flag_params]


def _block_bounds(*, study: Study) -> list[int]:
    """Participant ids that start each block, plus one past the last id."""
    ids = (
        Participant.objects.filter(study=study, is_preview=False).order_by("id").values_list("id", flat=True)
    )
    bounds: list[int] = []
    last = None
    for i, pid in enumerate(ids.iterator(chunk_size=20000)):
        if i % BLOCK_PARTICIPANTS == 0:
            bounds.append(pid)
        last = pid
    if last is not None:
        bounds.append(last + 1)
    return bounds


def rating_copy_blocks(
    *,
    study: Study,
    rules: stats.ExclusionRules,
    labels: dict[int, str],
    pseudonymise: bool,
    counter: list[int],
) -> Iterator[str]:
    """The ratings export's CSV rows (no header), one block of participants at a time, written by PostgreSQL.
    `counter[0]` grows by the rows written."""
    bounds = _block_bounds(study=study)
    for low, high in zip(bounds, bounds[1:], strict=False):
        sql, params = _block_sql(
            study=study, rules=rules, labels=labels, pseudonymise=pseudonymise, low=low, high=high
        )
        buffer = io.StringIO()
        with connection.cursor() as cur:
            select = cur.mogrify(sql, params).decode()
            cur.cursor.copy_expert(f"COPY ({select}) TO STDOUT WITH (FORMAT csv)", buffer)
            counter[0] += max(cur.cursor.rowcount, 0)
        text = buffer.getvalue()
        if text:
            yield text
