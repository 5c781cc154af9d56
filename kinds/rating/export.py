"""The rating kind's answers export, the study's `ratings` export (`StudyKind.answers_export`): one row per counted
rating with its design variables, the scale's word for its value and the exclusion flags the analysis would apply.

Two paths, the same cells: `rating_export` in Python (rows ordered by participant, one participant's ratings
buffered at a time to attach the flags, which depend on all of that participant's answers), and
`rating_export_lines`, written by PostgreSQL (export_sql.py), used wherever the rules allow it.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator

from analysis.exclusions import RULE_NAMES, ExclusionRules, participant_exclusion_flags_one
from analysis.exports import CsvStream, Echo, cell_neutralise
from studies.models import Study

from . import export_sql
from .frame import RATING_EXPORT_FIELDS, rating_export_rows

# --- In Python ------------------------------------------------------------------------------

RATING_FLAG_COLUMNS = ["excluded", *(f"excluded_{rule}" for rule in RULE_NAMES)]


def rating_export_header() -> list[str]:
    """The ratings export's columns: the selector's fields with `value_label` (the scale's word for the value,
    e.g. Bad/Okay/Good) beside `value`, then the exclusion flags."""
    fields = list(RATING_EXPORT_FIELDS)
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
    fields = list(RATING_EXPORT_FIELDS)
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

    for row in rating_export_rows(study=study):
        if buffer and row[i_pid] != buffer[0][i_pid]:
            yield from flush()
            buffer = []
        buffer.append(row)
    if buffer:
        yield from flush()


def rating_export_lines(study: Study, rules: ExclusionRules, *, pseudonymise: bool) -> CsvStream | None:
    """The ratings export written by PostgreSQL (export_sql.py): the same cells as `rating_export`; None where
    the SQL form cannot serve `rules` (`StudyKind.answers_export_lines`)."""
    if not export_sql.sql_export_supported(rules=rules, flag_columns=RATING_FLAG_COLUMNS):
        return None
    counter = [0]
    header = csv.writer(Echo(), lineterminator="\n").writerow(rating_export_header())

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


def rating_export(study: Study, rules: ExclusionRules) -> tuple[list[str], Iterator[list]]:
    """The ratings export's header and records (`StudyKind.answers_export`)."""
    return rating_export_header(), rating_export_records(study=study, rules=rules)
