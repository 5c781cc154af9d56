"""Answers for the demo studies (studies/demo/), written straight into their rows with a seeded generator, so that
their open-science bundles (analysis/bundle.py) have data to describe and analyses to re-run."""

from __future__ import annotations

import random
from datetime import timedelta

from django.utils import timezone

from kinds.pairwise.models import PairItem
from kinds.rating.models import Rating
from studies.models import (
    Assignment,
    Participant,
    QuestionnaireAnswer,
    QuestionnaireRun,
    Study,
    StudySituation,
)
from studies.participants import participant_enroll

NOW = timezone.now().replace(microsecond=0)


def _enrol(study: Study, n: int) -> list[Participant]:
    """`n` new participants (ids numbered on from the study's count)."""
    first = Participant.objects.filter(study=study).count()
    return [
        participant_enroll(
            study=study, external_id=f"{study.slug}-rater-{i}", platform=study.platform, now=NOW
        )
        for i in range(first, first + n)
    ]


def _completed(study: Study) -> None:
    Participant.objects.filter(study=study).update(
        status=Participant.Status.COMPLETED, finished_at=NOW + timedelta(minutes=20)
    )


def ratings_fill(study: Study, *, participants: int, seed: int = 1) -> None:
    """Every page of `participants` new raters answered on the study's scale."""
    rng = random.Random(seed)
    values = [int(point["value"]) for point in study.scale]
    for participant in _enrol(study, participants):
        for assignment in Assignment.objects.filter(participant=participant).order_by("position"):
            Rating.objects.create(
                assignment=assignment, value=rng.choice(values), response_time_ms=rng.randint(3000, 30000)
            )
        Assignment.objects.filter(participant=participant).update(answered_at=NOW)
    _completed(study)


def votes_fill(study: Study, *, participants: int, seed: int = 1) -> None:
    """Every pair of `participants` new raters answered: the known-answer pairs rightly, the others at random,
    the first condition (by position) chosen more often, so the strengths differ."""
    rng = random.Random(seed)
    favourite = study.conditions.order_by("position").values_list("name", flat=True).first()
    for participant in _enrol(study, participants):
        for item in PairItem.objects.filter(participant=participant).select_related(
            "left__condition", "right__condition"
        ):
            if item.known_answer_id is not None:
                item.choice = PairItem.Choice.LEFT if item.good_on_left else PairItem.Choice.RIGHT
            else:
                weights = [
                    2 if item.left.condition.name == favourite else 1,
                    2 if item.right.condition.name == favourite else 1,
                    0.5,
                ]
                item.choice = rng.choices(
                    [PairItem.Choice.LEFT, PairItem.Choice.RIGHT, PairItem.Choice.TIE], weights
                )[0]
                item.both_inadequate = rng.random() < 0.1
            item.answered_at = NOW
            item.response_time_ms = rng.randint(3000, 30000)
            item.save(update_fields=["choice", "both_inadequate", "answered_at", "response_time_ms"])
    _completed(study)


def questionnaire_fill(study: Study, *, participants: int, seed: int = 1) -> None:
    """A default and an evoked run of the study's instrument for `participants` new participants."""
    rng = random.Random(seed)
    settings = study.questionnaire_settings
    instrument = settings.instrument
    numbers = list(instrument.items.order_by("number").values_list("number", flat=True))
    situations = [link.situation for link in StudySituation.objects.filter(study=study).order_by("id")]
    for participant in _enrol(study, participants):
        situation = rng.choice(situations)
        for phase in (QuestionnaireRun.Phase.DEFAULT, QuestionnaireRun.Phase.EVOKED):
            evoked = phase == QuestionnaireRun.Phase.EVOKED
            run = QuestionnaireRun.objects.create(
                study=study,
                condition_id=participant.condition_id,
                participant=participant,
                subject_key=f"participant-{participant.pk}",
                phase=phase,
                situation=situation if evoked else None,
                item_order=numbers,
                source=QuestionnaireRun.Source.PARTICIPANT,
                completed_at=NOW,
            )
            QuestionnaireAnswer.objects.bulk_create(
                QuestionnaireAnswer(
                    run=run,
                    item_number=number,
                    value=rng.randint(instrument.scale_min + evoked, instrument.scale_max),
                    position=position,
                )
                for position, number in enumerate(numbers, start=1)
            )
    _completed(study)
