"""CSV exports, streamed: the dashboard, the `export` command and the API all iterate the same generators.

Memory stays bounded whatever the study's size: rows come through a server-side cursor in chunks
(`analysis.selectors`, a kind's own for its answers: kinds/rating/export.py), each line is written and handed on.

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

from analysis import selectors
from analysis.exclusions import ExclusionRules
from analysis.pseudonyms import pseudonym
from generation.selectors import provenance_rows
from studies.kinds import kind_of, resolved
from studies.models import Study

FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
EXPORT_KINDS = ("ratings", "participants", "responses")


def export_names(study: Study) -> tuple[str, ...]:
    """The exports a study offers: the spine's (`ratings`, its answers, where its kind exports them:
    `StudyKind.answers_export`) and its kind's further ones (`StudyKind.further_exports`)."""
    kind = kind_of(study)
    spine = EXPORT_KINDS if kind.answers_export is not None else EXPORT_KINDS[1:]
    return spine + tuple(kind.further_exports)


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


class Echo:
    """A file-like object whose write() returns what it was given: csv.writer then yields lines one by one."""

    def write(self, value: str) -> str:
        return value


def csv_lines(header: list[str], rows: Iterable[Iterable[object]]) -> CsvStream:
    """The CSV lines of `rows` under `header` (a `CsvStream`: it counts the rows it has written)."""
    counter = [0]

    def lines() -> Iterator[str]:
        writer = csv.writer(Echo(), lineterminator="\n")
        yield writer.writerow(header)
        by_type, other, write = _BY_TYPE, _other, writer.writerow
        for row in rows:
            counter[0] += 1
            yield write([by_type.get(type(v), other)(v) for v in row])

    return CsvStream(lines(), counter)


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
    """The CSV lines of one export of a study (`what` in `export_names(study)`), streamed. The `ratings` export is
    the study's answers, its kind's own export (`StudyKind.answers_export`, or `answers_export_lines` when the kind
    writes them as CSV itself).

    Participants' platform ids are study staff's only (`reveals_participant_ids`): with
    `reveal_participant_ids=False` the `participant` column holds a pseudonym instead (analysis.pseudonyms). The exclusion flags follow `rules`, by
    default the study's declared rules."""
    rules = rules or ExclusionRules.from_declared(study.exclusion_rules)
    kind = kind_of(study)
    # The kind's answers written as CSV already (the rating kind's, by PostgreSQL), where it can.
    if what == "ratings" and kind.answers_export_lines is not None:
        written = resolved(kind.answers_export_lines)(study, rules, pseudonymise=not reveal_participant_ids)
        if written is not None:
            return written
    if (
        what == "ratings" and kind.answers_export is not None
    ):  # the kind's own answers (ratings, votes, turns)
        header, records = resolved(kind.answers_export)(study, rules)
        if not reveal_participant_ids:
            records = _pseudonymised(records, header=header, study=study)
        return csv_lines(header, records)
    further = kind.further_exports.get(what)
    if further is not None:  # the kind's own further export (e.g. the chat kind's transcript)
        header, records = resolved(further)(study, rules)
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


def table_lines(frame) -> Iterator[str]:
    """An aggregate table (a small DataFrame) as neutralised CSV lines."""
    return csv_lines([str(c) for c in frame.columns], frame.itertuples(index=False, name=None))
