"""Reads a study's rows for analysis and export. Analysis only reads: nothing here writes.

`rating_rows_frame` is the one door the statistics go through: ONE query, whatever the study's size, into a
pandas DataFrame with one row per rating. The export selectors stream the same rows through a server-side cursor
(PostgreSQL) so a million-rating export never holds more than one chunk in memory.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass

import pandas as pd
from django.db import connection
from django.db.models import QuerySet

from kinds.rating.models import Rating
from studies.models import Assignment, Condition, Participant, Response, Study

# Column name in the frame → ORM path from Rating. Order matters: it is the SELECT list.
RATING_FRAME_FIELDS: dict[str, str] = {
    "value": "value",
    "response_time_ms": "response_time_ms",
    "position": "assignment__position",
    "participant_id": "assignment__participant_id",
    "flagged_for_exclusion": "assignment__participant__flagged_for_exclusion",
    # Status and wrong attention-check answers: the incomplete-participation and straight-lining rules read them.
    "participant_status": "assignment__participant__status",
    "attention_failures": "assignment__participant__attention_failures",
    # The authenticity rule's verdict (studies/authenticity.py); NULL (no signals) reads as False.
    "authenticity_excluded": "assignment__participant__authenticity__excluded",
    "response_id": "assignment__response_id",
    "condition": "assignment__response__condition__name",
    "prompt_id": "assignment__response__prompt_id",
    "emotion": "assignment__response__prompt__emotion__name",
    # Valence is read from the Emotion table now, at analysis time: regrouping an emotion in the admin
    # changes every later analysis, never the stored ratings.
    "valence": "assignment__response__prompt__emotion__valence",
}
FRAME_FETCH_ROWS = 100_000


def study_get_by_slug(*, slug: str) -> Study:
    """The study with this slug; raises Study.DoesNotExist."""
    return Study.objects.get(slug=slug)


def study_list() -> QuerySet[Study]:
    return Study.objects.all().order_by("-created_at", "id")


def rating_queryset(
    *, study: Study | None = None, participant_ids: Collection[int] | None = None
) -> QuerySet[Rating]:
    """Ratings that count: answers to response pages (attention-check pages excluded) by real participants
    (staff previews excluded); of `study`, or of the participants `participant_ids` (whatever their studies)."""
    if (study is None) == (participant_ids is None):
        raise ValueError("give a study or participant ids, not both")
    whose = (
        {"assignment__participant__study": study}
        if study is not None
        else {"assignment__participant_id__in": list(participant_ids)}
    )
    return Rating.objects.filter(
        **whose, assignment__participant__is_preview=False, assignment__kind=Assignment.Kind.RESPONSE
    )


def rating_rows_frame(
    *, study: Study | None = None, participant_ids: Collection[int] | None = None
) -> pd.DataFrame:
    """One row per counted rating (of `study`, or of the participants `participant_ids`), with its design
    variables (see RATING_FRAME_FIELDS), in one query.

    The ORM builds the SQL (joins through assignment → response → prompt → emotion, participant); the rows are
    fetched with a bare cursor, which skips per-row model machinery and is several times faster on large studies.
    """
    qs = (
        rating_queryset(study=study, participant_ids=participant_ids)
        .order_by()
        .values_list(*RATING_FRAME_FIELDS.values())
    )
    sql, params = qs.query.sql_with_params()
    columns = list(RATING_FRAME_FIELDS)
    frames = []
    # A server-side cursor on PostgreSQL, read in blocks turned into DataFrames at once: the Python tuples of one
    # block are alive at a time, not a million of them (peak memory roughly halves on large studies).
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(FRAME_FETCH_ROWS):
            frames.append(_frame_block(rows, columns))
    if not frames:
        return _frame_block([], columns)
    return pd.concat(frames, ignore_index=True)


def _frame_block(rows: list[tuple], columns: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(rows, columns=columns)
    frame["value"] = frame["value"].astype("int64")
    frame["response_time_ms"] = pd.to_numeric(frame["response_time_ms"], errors="coerce").astype("float64")
    frame["flagged_for_exclusion"] = frame["flagged_for_exclusion"].astype(bool)
    frame["attention_failures"] = frame["attention_failures"].astype("int64")
    frame["authenticity_excluded"] = frame["authenticity_excluded"].fillna(False).astype(bool)
    for column in ("condition", "emotion", "valence", "participant_status"):
        frame[column] = frame[column].astype("object")
    return frame


@dataclass(frozen=True)
class ConditionInfo:
    name: str
    label: str
    is_baseline: bool


def condition_list(*, study: Study) -> list[ConditionInfo]:
    """The study's conditions in their display order."""
    return [
        ConditionInfo(name=c.name, label=c.label or c.name, is_baseline=c.is_baseline)
        for c in Condition.objects.filter(study=study).order_by("position", "name")
    ]


# --- Streams for exports ----------------------------------------------------------------------------------

EXPORT_CHUNK_SIZE = 2000

RATING_EXPORT_FIELDS: dict[str, str] = {
    "rating_id": "id",
    "participant": "assignment__participant__external_id",
    "participant_id": "assignment__participant_id",
    "participant_status": "assignment__participant__status",
    "flagged_for_exclusion": "assignment__participant__flagged_for_exclusion",
    "attention_failures": "assignment__participant__attention_failures",
    "authenticity_excluded": "assignment__participant__authenticity__excluded",
    "condition": "assignment__response__condition__name",
    "prompt_id": "assignment__response__prompt_id",
    "dialogue_id": "assignment__response__prompt__dialogue_id",
    "emotion": "assignment__response__prompt__emotion__name",
    "valence": "assignment__response__prompt__emotion__valence",
    "situation": "assignment__response__prompt__situation",
    "speaker_utterance": "assignment__response__prompt__speaker_utterance",
    "response_id": "assignment__response_id",
    "response_text": "assignment__response__text",
    "position": "assignment__position",
    "value": "value",
    "response_time_ms": "response_time_ms",
    "rated_at": "created_at",
}


def _streamed(ordered, fields: dict[str, str]) -> Iterator[tuple]:
    """The rows of an ordered queryset as tuples of `fields`' paths, read in chunks (a server-side cursor on
    PostgreSQL): memory stays bounded by the chunk size, not the study's size."""
    return ordered.values_list(*fields.values()).iterator(chunk_size=EXPORT_CHUNK_SIZE)


def rating_export_rows(*, study: Study) -> Iterator[tuple]:
    """Every counted rating with its design variables, ordered by participant then position, streamed in chunks
    (a server-side cursor on PostgreSQL): memory stays bounded by the chunk size, not the study's size."""
    ordered = rating_queryset(study=study).order_by("assignment__participant_id", "assignment__position")
    return _streamed(ordered, RATING_EXPORT_FIELDS)


PARTICIPANT_EXPORT_FIELDS: dict[str, str] = {
    "participant_id": "id",
    "participant": "external_id",
    "condition": "condition__name",
    "platform": "platform",
    "status": "status",
    "step": "step",
    "flagged_for_exclusion": "flagged_for_exclusion",
    "exclusion_reasons": "exclusion_reasons",
    "attention_failures": "attention_failures",
    "teq_score": "teq_score",
    "teq_answers": "teq_answers",
    "demographics": "demographics",
    "started_at": "started_at",
    "finished_at": "finished_at",
    # The authenticity score (blank: no signals), its reasons, and the review of its flag (studies/authenticity.py).
    "authenticity_score": "authenticity__score",
    "authenticity_flagged": "authenticity__flagged",
    "authenticity_reasons": "authenticity__reasons",
    "authenticity_review": "authenticity__review",
}


def participant_export_rows(*, study: Study) -> Iterator[tuple]:
    """The study's real participants (previews excluded), streamed."""
    return _streamed(
        Participant.objects.filter(study=study, is_preview=False).order_by("id"), PARTICIPANT_EXPORT_FIELDS
    )


RESPONSE_EXPORT_FIELDS: dict[str, str] = {
    "response_id": "id",
    "condition": "condition__name",
    "prompt_id": "prompt_id",
    "dialogue_id": "prompt__dialogue_id",
    "emotion": "prompt__emotion__name",
    "valence": "prompt__emotion__valence",
    "situation": "prompt__situation",
    "speaker_utterance": "prompt__speaker_utterance",
    "sample_index": "sample_index",
    "text": "text",
    "source": "source",
    "review": "review",
    "review_flags": "review_flags",
    "created_at": "created_at",
}


def response_export_rows(*, study: Study) -> Iterator[tuple]:
    """The study's responses with their prompt, streamed: the texts participants may be shown, not a judge's own
    inputs (`Response.Source.JUDGE_INPUT`)."""
    ordered = (
        Response.objects.filter(prompt__study=study)
        .exclude(source=Response.Source.JUDGE_INPUT)
        .order_by("condition__position", "condition__name", "prompt_id", "sample_index")
    )
    return _streamed(ordered, RESPONSE_EXPORT_FIELDS)
