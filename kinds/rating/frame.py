"""The rating kind's answers, read once for the statistics and once for the export.

`rating_rows_frame` is the one door the rating statistics go through: ONE query, whatever the study's size, into a
pandas DataFrame with one row per counted rating. `rating_export_rows` streams the same ratings through a
server-side cursor (PostgreSQL), so a million-rating export never holds more than one chunk in memory.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

import pandas as pd
from django.db import connection
from django.db.models import Count, Max, QuerySet

from analysis.selectors import rows_streamed
from studies.models import Assignment, Study

from .models import Rating

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


def rating_stamp(*, study: Study) -> dict:
    """The count and latest id of the study's counted ratings (`StudyKind.answers_stamp`): a new rating changes it."""
    return rating_queryset(study=study).aggregate(n=Count("id"), last=Max("id"))


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


# --- The stream for the export -------------------------------------------------------------------------------

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


def rating_export_rows(*, study: Study) -> Iterator[tuple]:
    """Every counted rating with its design variables, ordered by participant then position, streamed in chunks
    (a server-side cursor on PostgreSQL): memory stays bounded by the chunk size, not the study's size."""
    ordered = rating_queryset(study=study).order_by("assignment__participant_id", "assignment__position")
    return rows_streamed(ordered, RATING_EXPORT_FIELDS)
