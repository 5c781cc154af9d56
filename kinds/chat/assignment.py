"""The second factor: the label shown, crossed with the source and balanced (see kind.py)."""

from __future__ import annotations

import random
from datetime import datetime

from django.db.models import Count

from studies.balancing import counted_participants, fewest_first
from studies.models import StudySituation

from .models import ChatSettings, Conversation, Label

LABEL_IDS = {label: i for i, label in enumerate(Label.values)}


def study_labels(study) -> list[str]:
    try:
        labels = study.chat_settings.labels
    except ChatSettings.DoesNotExist:
        labels = ChatSettings(study=study).labels
    return [label for label in Label.values if label in (labels or [])] or [Label.NONE]


def cell_counts(study, condition_id: int, now: datetime) -> dict[str, int]:
    """Counted conversations (completed or holding participants, previews never) per label of one source."""
    counts = dict.fromkeys(study_labels(study), 0)
    rows = (
        Conversation.objects.filter(condition_id=condition_id, participant__study=study)
        .filter(counted_participants(study, now, prefix="participant__"))
        .order_by()
        .values("label")
        .annotate(n=Count("id"))
    )
    for row in rows:
        if row["label"] in counts:
            counts[row["label"]] = row["n"]
    return counts


def conversation_create(participant, *, rng: random.Random, now: datetime) -> Conversation:
    """The participant's conversation, its label the fewest used in their source's cell (ties at random, from the
    participant's seeded draws). Called under the enrolment's lock of the study row."""
    study = participant.study
    counts = cell_counts(study, participant.condition_id, now)
    by_id = {LABEL_IDS[label]: n for label, n in counts.items()}
    label = Label.values[fewest_first(by_id, rng)[0]]
    return Conversation.objects.create(
        participant=participant,
        condition_id=participant.condition_id,
        label=label,
        situation_id=_situation(study, rng, now),
    )


def _situation(study, rng: random.Random, now: datetime) -> int | None:
    """The study's corpus situation the fewest counted conversations were given (None: the study has none)."""
    counts = dict.fromkeys(
        StudySituation.objects.filter(study=study).values_list("situation_id", flat=True), 0
    )
    if not counts:
        return None
    rows = (
        Conversation.objects.filter(participant__study=study, situation__in=list(counts))
        .filter(counted_participants(study, now, prefix="participant__"))
        .order_by()
        .values("situation")
        .annotate(n=Count("id"))
    )
    for row in rows:
        counts[row["situation"]] = row["n"]
    return fewest_first(counts, rng)[0]
