"""The ratings export on PostgreSQL: `COPY (SELECT …) TO STDOUT WITH CSV`, with the formula neutralisation, the
pseudonyms, the scale labels and the exclusion flags computed in SQL.

The Python path (export.py's `rating_export_records` through `csv_lines`) builds every cell in Python: about
five times PostgreSQL's own COPY of the same rows. Here PostgreSQL writes the CSV itself in one COPY, whose
output is handed on piece by piece as it arrives (`rating_copy_pieces`), so memory stays flat whatever
the size. Both paths give the same cells; a test holds them together.

The SQL mirrors, cell by cell:
- `exports.cell_neutralise`: text starting with = + - @ TAB CR gets a leading apostrophe; numbers stay numbers;
  booleans are true/false; NULL is an empty cell; timestamps are `datetime.isoformat()` in UTC;
- the exclusion flags: not written here but derived, rule by rule, from the one declaration of the rules that the
  pandas and per-participant forms are derived from too (analysis/exclusion_predicates.py), over each
  participant's aggregate `f` (NULL times left out; no times: never too fast; no authenticity row: not excluded).
  A rule added there is in this SQL at once; a rule reading an aggregate `f` lacks fails loudly.
"""

from __future__ import annotations

import codecs
import os
import threading
from collections.abc import Iterator

from django.db import connection
from django.db.models import F

from analysis.exclusion_predicates import flags_sql
from analysis.exclusions import RULE_NAMES, ExclusionRules
from analysis.pseudonyms import pseudonym_sql
from studies.models import Study

from .frame import RATING_EXPORT_FIELDS, rating_queryset

PIECE_BYTES = 256 * 1024  # the CSV text is written and handed on in pieces of about this size
NARROW_FIELDS = (
    "participant_id",
    "value",
    "response_time_ms",
    "flagged_for_exclusion",
    "participant_status",
    "attention_failures",
    "authenticity_excluded",
)

KNOWN_FLAG_COLUMNS = ["excluded", *(f"excluded_{rule}" for rule in RULE_NAMES)]
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
BOOL_FIELDS = frozenset({"flagged_for_exclusion", "authenticity_excluded"})
TIME_FIELDS = frozenset({"rated_at"})
NUMBER_FIELDS = frozenset(
    {"rating_id", "participant_id", "prompt_id", "response_id", "position", "value", "attention_failures"}
)
KNOWN_EXPORT_FIELDS = TEXT_FIELDS | BOOL_FIELDS | TIME_FIELDS | NUMBER_FIELDS | {"response_time_ms"}
TRIGGER_CODES_SQL = "(61, 43, 45, 64, 9, 13)"  # = + - @ TAB CR, as exports.FORMULA_TRIGGERS


def sql_export_supported(*, rules: ExclusionRules, flag_columns: list[str]) -> bool:
    """True when PostgreSQL can write this export: the database is PostgreSQL, and the flag columns and the export's
    columns are the ones this module writes (a new export column: its type unknown here, the Python path)."""
    if connection.vendor != "postgresql":
        return False
    known_columns = set(RATING_EXPORT_FIELDS) <= KNOWN_EXPORT_FIELDS
    return list(flag_columns) == KNOWN_FLAG_COLUMNS and known_columns


def _text(expr: str) -> str:
    # ascii() of the first character (0 for '', NULL for NULL): integer comparisons, the cheapest test per cell.
    return f"CASE WHEN ascii({expr}) IN {TRIGGER_CODES_SQL} THEN '''' || {expr} ELSE {expr} END"


def _bool(expr: str) -> str:
    return f"CASE WHEN {expr} THEN 'true' WHEN NOT {expr} THEN 'false' END"


def _iso(expr: str) -> str:
    """`datetime.isoformat()` of an aware UTC datetime: PostgreSQL's ISO text of the UTC time, its fraction (which
    PostgreSQL writes without trailing zeros, and not at all when zero, like isoformat()) padded to six digits,
    with a T and +00:00."""
    text = f"({expr} AT TIME ZONE 'UTC')::text"
    return (
        f"replace(rpad({text}, CASE WHEN length({text}) = 19 THEN 19 ELSE 26 END, '0'), ' ', 'T') || '+00:00'"
    )


def _flag_sql(rules: ExclusionRules) -> tuple[list[str], list]:
    """SQL for `excluded` and each rule (RULE_NAMES order) over the per-participant aggregate `f`, derived from the
    one declaration of the rules (analysis/exclusion_predicates.py) as the pandas and per-participant forms are."""
    per_rule = [flags_sql(rules)[rule] for rule in RULE_NAMES]
    order = [sql for sql, _ in per_rule]
    params = [p for _, rule_params in per_rule for p in rule_params]
    # Parameters in the order they appear: excluded (every rule), then each flag again.
    sqls = [f"({' OR '.join(order)})", *order]
    return [f"CASE WHEN {s} THEN 'true' ELSE 'false' END" for s in sqls], params + params


def _export_sql(
    *, study: Study, rules: ExclusionRules, labels: dict[int, str], pseudonymise: bool
) -> tuple[str, list]:
    """The SELECT that COPY writes: the export's columns over the ORM's joins (`r`), joined to each participant's
    aggregate for the exclusion flags (`f`, over a narrow projection of the same rows)."""
    fields = list(RATING_EXPORT_FIELDS)
    counted = rating_queryset(study=study).order_by()
    wide = counted.values(**{f"x_{name}": F(path) for name, path in RATING_EXPORT_FIELDS.items()})
    narrow = counted.values(**{f"x_{name}": F(RATING_EXPORT_FIELDS[name]) for name in NARROW_FIELDS})
    wide_sql, wide_params = wide.query.sql_with_params()
    narrow_sql, narrow_params = narrow.query.sql_with_params()
    out: list[str] = []
    params: list = []
    for name in fields:
        col = f"r.x_{name}"
        if name == "participant" and pseudonymise:
            expression, expression_params = pseudonym_sql(study_id=study.pk, column=col)
            out.append(expression)
            params += expression_params
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
        f"SELECT {', '.join(out)}, {', '.join(flags)} FROM ({wide_sql}) r JOIN ("
        "SELECT x_participant_id AS pid, bool_or(x_flagged_for_exclusion) AS flagged, "
        "min(x_participant_status) AS status, max(x_attention_failures) AS failures, "
        "bool_or(x_authenticity_excluded) AS unauthentic, "
        "percentile_cont(0.5) WITHIN GROUP (ORDER BY x_response_time_ms) AS median_ms, count(*) AS n, "
        f"count(DISTINCT x_value) AS n_distinct FROM ({narrow_sql}) n GROUP BY x_participant_id"
        ") f ON f.pid = r.x_participant_id ORDER BY r.x_participant_id, r.x_position"
    )
    return sql, [*params, *flag_params, *wide_params, *narrow_params]  # in the order they appear


def rating_copy_pieces(
    *,
    study: Study,
    rules: ExclusionRules,
    labels: dict[int, str],
    pseudonymise: bool,
    counter: list[int],
) -> Iterator[str]:
    """The ratings export's CSV rows (no header), written by PostgreSQL's COPY and handed on in pieces as they
    come. `counter[0]` is the number of rows once the stream is done.

    psycopg2's copy_expert pushes every row into a file's write(); to pull pieces from it instead, the COPY runs
    on a helper thread over this request's own database connection (so it sees what the request's transaction
    sees) and writes into a pipe through a C-level buffered writer (no Python call per row), and this generator
    reads the pipe in pieces. The pipe's buffer is the back-pressure: memory stays flat. The request's thread
    does not touch the connection meanwhile; a reader that stops early closes the pipe, which stops the COPY."""
    sql, params = _export_sql(study=study, rules=rules, labels=labels, pseudonymise=pseudonymise)
    connection.ensure_connection()
    raw = connection.connection
    with connection.cursor() as cur:
        select = cur.mogrify(sql, params).decode()
    read_fd, write_fd = os.pipe()
    failure: list[BaseException] = []

    def copy() -> None:
        try:
            with os.fdopen(write_fd, "wb", buffering=PIECE_BYTES) as sink, raw.cursor() as cur:
                cur.copy_expert(f"COPY ({select}) TO STDOUT WITH (FORMAT csv)", sink)
                counter[0] = max(cur.rowcount, 0)
        except BaseException as exc:  # noqa: BLE001 — handed to the reader, which raises it
            failure.append(exc)

    worker = threading.Thread(target=copy, name="ratings-export-copy", daemon=True)
    worker.start()
    decoder = codecs.getincrementaldecoder("utf-8")()
    finished = False
    try:
        with os.fdopen(read_fd, "rb", buffering=0) as source:
            while piece := source.read(PIECE_BYTES):
                yield decoder.decode(piece)
            finished = True
    finally:
        if not finished:
            raw.cancel()  # the reader went away mid-export: stop the query rather than read it to the end
        worker.join()
        if not finished:
            connection.close()  # a cancelled COPY leaves the connection in no state to reuse
    tail = decoder.decode(b"", final=True)
    if failure:
        raise failure[0]
    if tail:
        yield tail
