"""Reads a study's rows for analysis and export, whatever its kind (a kind's answers are read in its package:
kinds/rating/frame.py, kinds/pairwise/frame.py). Analysis only reads: nothing here writes.

The export selectors stream rows through a server-side cursor (PostgreSQL), so a large export never holds more
than one chunk in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from django.db.models import QuerySet

from studies.models import Condition, Participant, Response, Study


def study_get_by_slug(*, slug: str) -> Study:
    """The study with this slug; raises Study.DoesNotExist."""
    return Study.objects.get(slug=slug)


def study_list() -> QuerySet[Study]:
    return Study.objects.all().order_by("-created_at", "id")


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


def rows_streamed(ordered, fields: dict[str, str]) -> Iterator[tuple]:
    """The rows of an ordered queryset as tuples of `fields`' paths, read in chunks (a server-side cursor on
    PostgreSQL): memory stays bounded by the chunk size, not the study's size."""
    return ordered.values_list(*fields.values()).iterator(chunk_size=EXPORT_CHUNK_SIZE)


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
    return rows_streamed(
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
    return rows_streamed(ordered, RESPONSE_EXPORT_FIELDS)
