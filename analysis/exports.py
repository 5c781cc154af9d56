"""CSV exports, streamed: the dashboard, the `export` command and the API all iterate the same generators.

Memory stays bounded whatever the study's size: rows come through a server-side cursor in chunks
(`analysis.selectors`), each line is written and handed on, and the ratings export holds at most one participant's
ratings at a time (to attach the exclusion flags, which depend on all of that participant's answers).

Cells a spreadsheet would run as a formula (text starting with = + - @, a tab or a carriage return) get a leading
apostrophe, so opening an export in Excel or LibreOffice never executes participant-written text.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal

from django.conf import settings

from analysis import export_sql, selectors
from analysis.exclusions import RULE_NAMES, ExclusionRules, participant_exclusion_flags_one
from analysis.pseudonyms import pseudonym
from generation.selectors import provenance_rows
from studies.kinds import kind_of, resolved
from studies.models import Study

FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
EXPORT_KINDS = ("ratings", "participants", "responses")


def export_names(study: Study) -> tuple[str, ...]:
    """The exports a study offers: the spine's and its kind's further ones (`StudyKind.further_exports`)."""
    return EXPORT_KINDS + tuple(kind_of(study).further_exports)


class ExportError(Exception):
    pass


def _text(value: str) -> str:
    # A formula trigger as the first character: prefix an apostrophe (the spreadsheet then shows plain text).
    return "'" + value if value and value[0] in _TRIGGER_CHARS else value


def _other(value: object) -> object:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value != value:  # NaN: an empty cell
        return ""
    if isinstance(value, int | float | Decimal):
        return value
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, list | dict):
        return _text(json.dumps(value, ensure_ascii=False))
    return _text(str(value))


_TRIGGER_CHARS = frozenset("".join(FORMULA_TRIGGERS))
# Exact-type dispatch: an export converts tens of millions of cells, so the common types skip isinstance chains.
_BY_TYPE: dict[type, Callable[[object], object]] = {
    str: _text,  # type: ignore[dict-item]
    int: lambda v: v,
    bool: lambda v: "true" if v else "false",
    type(None): lambda v: "",
    dt.datetime: lambda v: v.isoformat(),  # type: ignore[attr-defined]
}


def cell_neutralise(value: object) -> object:
    """A value as a CSV cell: text that a spreadsheet would treat as a formula gets a leading apostrophe.
    Numbers stay numbers (a negative number is data, not a formula)."""
    return _BY_TYPE.get(type(value), _other)(value)


class _Echo:
    """A file-like object whose write() returns what it was given: csv.writer then yields lines one by one."""

    def write(self, value: str) -> str:
        return value


def csv_lines(header: list[str], rows: Iterable[Iterable[object]]) -> CsvStream:
    """The CSV lines of `rows` under `header` (a `CsvStream`: it counts the rows it has written)."""
    counter = [0]

    def lines() -> Iterator[str]:
        writer = csv.writer(_Echo(), lineterminator="\n")
        yield writer.writerow(header)
        by_type, other, write = _BY_TYPE, _other, writer.writerow
        for row in rows:
            counter[0] += 1
            yield write([by_type.get(type(v), other)(v) for v in row])

    return CsvStream(lines(), counter)


# --- Ratings (long format) ------------------------------------------------------------------------------

RATING_FLAG_COLUMNS = ["excluded", *(f"excluded_{rule}" for rule in RULE_NAMES)]


def rating_export_header() -> list[str]:
    """The ratings export's columns: the selector's fields with `value_label` (the scale's word for the value,
    e.g. Bad/Okay/Good) beside `value`, then the exclusion flags."""
    fields = list(selectors.RATING_EXPORT_FIELDS)
    at = fields.index("value") + 1
    return [*fields[:at], "value_label", *fields[at:], *RATING_FLAG_COLUMNS]


def scale_labels(*, study: Study) -> dict[int, str]:
    """The study's scale as {value: label}, labels neutralised like any other cell."""
    out: dict[int, str] = {}
    for point in study.scale or []:
        out[int(point["value"])] = str(cell_neutralise(str(point.get("label", point["value"]))))
    return out


def rating_export_records(*, study: Study, rules: ExclusionRules) -> Iterator[list]:
    """One record per counted rating (see `rating_export_header`), with the exclusion flags the analysis would
    apply under `rules`. Rows arrive ordered by participant, so one participant's ratings are buffered at a time."""
    fields = list(selectors.RATING_EXPORT_FIELDS)
    i_pid, i_value = fields.index("participant_id"), fields.index("value")
    i_rt, i_flagged = fields.index("response_time_ms"), fields.index("flagged_for_exclusion")
    i_status, i_failures = fields.index("participant_status"), fields.index("attention_failures")
    i_authenticity = fields.index("authenticity_excluded")
    labels = scale_labels(study=study)
    buffer: list[tuple] = []

    def flush() -> Iterator[list]:
        first = buffer[0]
        flags = participant_exclusion_flags_one(
            values=[r[i_value] for r in buffer],
            times_ms=[r[i_rt] for r in buffer],
            flagged=bool(first[i_flagged]),
            status=first[i_status],
            attention_failures=int(first[i_failures]),
            rules=rules,
            authenticity_excluded=bool(first[i_authenticity]),
        )
        extra = [flags["excluded"], *(flags[rule] for rule in RULE_NAMES)]
        for r in buffer:
            yield [*r[: i_value + 1], labels.get(r[i_value], ""), *r[i_value + 1 :], *extra]

    for row in selectors.rating_export_rows(study=study):
        if buffer and row[i_pid] != buffer[0][i_pid]:
            yield from flush()
            buffer = []
        buffer.append(row)
    if buffer:
        yield from flush()


# --- Participants ---------------------------------------------------------------------------------------


def participant_export_header() -> list[str]:
    return list(selectors.PARTICIPANT_EXPORT_FIELDS)


def participant_export_records(*, study: Study) -> Iterator[tuple]:
    return selectors.participant_export_rows(study=study)


# --- Responses (with generation provenance) -------------------------------------------------------------

# The generation app owns provenance and exposes it through its read-only selector
# `generation.selectors.provenance_rows(study=...)` — the one arrow from analysis into generation
# (one dict per generated response, current provenance only). The responses export joins its columns by response
# id, leaving out the bulky request/response bodies (those are in the generation app's own provenance export).
# The join map holds one small dict per GENERATED response: memory grows with the stimuli, never with the ratings.
PROVENANCE_COLUMNS = [
    "edited", "provider", "provider_kind", "placeholder_reply", "base_url", "model_requested", "model_returned", "system_fingerprint",
    "provider_response_id", "finish_reason", "input_tokens", "output_tokens", "cost_usd", "latency_ms", "attempts",
    "requested_at", "completed_at",
]  # fmt: skip


def response_export_header() -> list[str]:
    return [*selectors.RESPONSE_EXPORT_FIELDS, *PROVENANCE_COLUMNS]


def response_export_records(*, study: Study) -> Iterator[list]:
    provenance: dict[int, dict] = {}
    for row in provenance_rows(study=study):
        provenance[int(row["response_id"])] = {c: row.get(c) for c in PROVENANCE_COLUMNS}
    for r in selectors.response_export_rows(study=study):
        found = provenance.get(r[0])
        yield [*r, *((found or {}).get(c) for c in PROVENANCE_COLUMNS)]


# --- One entry point ------------------------------------------------------------------------------------


def _pseudonymised(records: Iterable, *, header: list[str], study: Study) -> Iterator[list]:
    i_external = header.index("participant")
    for record in records:
        record = list(record)
        record[i_external] = pseudonym(study_id=study.pk, platform_id=record[i_external])
        yield record


def reveals_participant_ids(user) -> bool:
    """Raw platform ids in exports: staff only, and only where settings.EXPORT_RAW_IDS_FOR_STAFF allows
    (everyone else gets analysis.pseudonyms' stable pseudonyms)."""
    return bool(user.is_staff and settings.EXPORT_RAW_IDS_FOR_STAFF)


def export_lines(
    *,
    study: Study,
    what: str,
    rules: ExclusionRules | None = None,
    reveal_participant_ids: bool = True,
) -> Iterator[str]:
    """The CSV lines of one export of a study (`what` in EXPORT_KINDS), streamed. The `ratings` export is the
    study's answers: its kind's own export where the kind declares one (`StudyKind.answers_export`).

    Participants' platform ids are study staff's only (`reveals_participant_ids`): with
    `reveal_participant_ids=False` the `participant` column holds a pseudonym instead (analysis.pseudonyms). The exclusion flags follow `rules`, by
    default the study's declared rules."""
    rules = rules or ExclusionRules.from_declared(study.exclusion_rules)
    answers_export = kind_of(study).answers_export
    if what == "ratings" and answers_export is not None:  # the kind's own answers (e.g. pairwise votes)
        header, records = resolved(answers_export)(study, rules)
        if not reveal_participant_ids:
            records = _pseudonymised(records, header=header, study=study)
        return csv_lines(header, records)
    further = kind_of(study).further_exports.get(what)
    if further is not None:  # the kind's own further export (e.g. the chat kind's transcript)
        header, records = resolved(further)(study, rules)
        if not reveal_participant_ids:
            records = _pseudonymised(records, header=header, study=study)
        return csv_lines(header, records)
    if what == "ratings" and export_sql.sql_export_supported(rules=rules, flag_columns=RATING_FLAG_COLUMNS):
        return _copy_lines(study=study, rules=rules, pseudonymise=not reveal_participant_ids)
    if what == "ratings":
        header, records = rating_export_header(), rating_export_records(study=study, rules=rules)
        if not reveal_participant_ids:
            records = _pseudonymised(records, header=header, study=study)
        return csv_lines(header, records)
    if what == "participants":
        header, records = participant_export_header(), participant_export_records(study=study)
        if not reveal_participant_ids:
            records = _pseudonymised(records, header=header, study=study)
        return csv_lines(header, records)
    if what == "responses":
        return csv_lines(response_export_header(), response_export_records(study=study))
    raise ExportError(f"unknown export {what!r}: choose one of {', '.join(export_names(study))}")


class CsvStream:
    """The CSV text of an export, in pieces (lines, or blocks of lines), counting its data rows in `rows`."""

    def __init__(self, pieces: Iterator[str], counter: list[int]):
        self._pieces, self._counter = pieces, counter

    def __iter__(self) -> CsvStream:
        return self

    def __next__(self) -> str:
        return next(self._pieces)

    @property
    def rows(self) -> int:
        return self._counter[0]

    def close(self) -> None:
        """Stops the stream early (a download cut short): the ratings export's COPY stops with it."""
        close = getattr(self._pieces, "close", None)
        if close is not None:
            close()


def _copy_lines(*, study: Study, rules: ExclusionRules, pseudonymise: bool) -> CsvStream:
    """The ratings export written by PostgreSQL (see `analysis.export_sql`): the same cells as the Python path."""
    counter = [0]
    header = csv.writer(_Echo(), lineterminator="\n").writerow(rating_export_header())

    def pieces() -> Iterator[str]:
        yield header
        yield from export_sql.rating_copy_pieces(
            study=study,
            rules=rules,
            labels=scale_labels(study=study),
            pseudonymise=pseudonymise,
            counter=counter,
        )

    return CsvStream(pieces(), counter)


def table_lines(frame) -> Iterator[str]:
    """An aggregate table (a small DataFrame) as neutralised CSV lines."""
    return csv_lines([str(c) for c in frame.columns], frame.itertuples(index=False, name=None))
