"""Builds rating studies with known answers, straight into the database (bulk inserts, so tests stay fast)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from kinds.rating.models import Rating
from studies.models import (
    Assignment,
    AttentionCheck,
    Condition,
    Emotion,
    Participant,
    Prompt,
    Response,
    Study,
    Valence,
)

VALENCE = {
    "joyful": Valence.POSITIVE,
    "proud": Valence.POSITIVE,
    "sad": Valence.NEGATIVE,
    "afraid": Valence.NEGATIVE,
}


@dataclass
class Rated:
    """One participant: their condition and the (emotion, value, response time) of each item in order."""

    condition: str
    items: list[tuple[str, int, int | None]]
    flagged: bool = False
    preview: bool = False
    external_id: str = ""
    extra_attention_value: int | None = None  # an answered attention-check page, which must never count
    status: str = Participant.Status.COMPLETED
    attention_failures: int = 0


@dataclass
class Built:
    study: Study
    participants: list[Participant] = field(default_factory=list)


def build_rating_study(
    *,
    slug: str,
    conditions: list[str],
    participants: list[Rated],
    baseline: str | None = None,
    prompts_per_emotion: int | None = None,
    response_text: str = "That sounds hard. How are you holding up?",
    exclusion_rules: dict | None = None,
) -> Built:
    extra = {} if exclusion_rules is None else {"exclusion_rules": exclusion_rules}
    study = Study.objects.create(slug=slug, title=f"Study {slug}", state=Study.State.CLOSED, seed=7, **extra)
    conds = {
        name: Condition.objects.create(
            study=study, name=name, label=name.upper(), position=i, is_baseline=(name == baseline)
        )
        for i, name in enumerate(conditions)
    }
    emotions = sorted({e for p in participants for e, _, _ in p.items})
    emo = {}
    for name in emotions:
        emo[name], _ = Emotion.objects.get_or_create(
            name=name, defaults={"valence": VALENCE.get(name, Valence.NEUTRAL)}
        )
    if prompts_per_emotion is None:  # enough for every rating of a condition to be on its own response
        need: dict[tuple[str, str], int] = {}
        for p in participants:
            for e, _, _ in p.items:
                need[(p.condition, e)] = need.get((p.condition, e), 0) + 1
        prompts_per_emotion = max(need.values(), default=1)
    prompts = {
        (name, i): Prompt(
            study=study,
            dialogue_id=f"{name}:{i}",
            emotion=emo[name],
            situation=f"A situation about being {name} #{i}",
            speaker_utterance=f"I felt {name} today ({i}).",
        )
        for name in emotions
        for i in range(prompts_per_emotion)
    }
    Prompt.objects.bulk_create(prompts.values())
    responses = {
        (c, key): Response(prompt=p, condition=conds[c], text=f"{response_text} [{c} {key[0]} {key[1]}]")
        for c in conditions
        for key, p in prompts.items()
    }
    Response.objects.bulk_create(responses.values())
    check = AttentionCheck.objects.create(
        study=study,
        situation="check",
        speaker_utterance="check",
        response_text="Choose Okay",
        expected_value=2,
        after_item=1,
    )
    people = [
        Participant(
            study=study,
            condition=conds[p.condition],
            external_id=p.external_id or f"{slug}-p{i:04d}",
            is_preview=p.preview,
            flagged_for_exclusion=p.flagged,
            attention_failures=p.attention_failures,
            status=p.status,
            step=Participant.Step.DONE
            if p.status == Participant.Status.COMPLETED
            else Participant.Step.ITEMS,
        )
        for i, p in enumerate(participants)
    ]
    Participant.objects.bulk_create(people)
    used: dict[tuple[str, str], int] = {}
    assignments, answers = [], []
    for person, spec in zip(people, participants, strict=True):
        for position, (emotion, value, rt) in enumerate(spec.items):
            # Cycle through the emotion's prompts so each participant sees distinct responses.
            k = used.get((spec.condition, emotion), 0)
            used[(spec.condition, emotion)] = k + 1
            response = responses[(spec.condition, (emotion, k % prompts_per_emotion))]
            a = Assignment(
                participant=person, position=position, kind=Assignment.Kind.RESPONSE, response=response
            )
            assignments.append(a)
            answers.append((a, value, rt))
        if spec.extra_attention_value is not None:
            a = Assignment(
                participant=person,
                position=len(spec.items),
                kind=Assignment.Kind.ATTENTION,
                attention_check=check,
            )
            assignments.append(a)
            answers.append((a, spec.extra_attention_value, 500))
    Assignment.objects.bulk_create(assignments)
    Rating.objects.bulk_create([Rating(assignment=a, value=v, response_time_ms=rt) for a, v, rt in answers])
    return Built(study=study, participants=people)


def participants_from_counts(
    condition: str,
    counts: dict[int, int],
    *,
    emotion: str = "sad",
    per_participant: int = 10,
    rt: int | None = 4000,
) -> list[Rated]:
    """Participants of one condition whose ratings add up to `counts` (value → number), shuffled with a fixed seed
    and dealt in batches, so participants differ (as real ones do) and the same call gives the same people."""
    values = [v for v, n in sorted(counts.items()) for _ in range(n)]
    random.Random(f"{condition}{sorted(counts.items())}").shuffle(values)
    assert len(values) % per_participant == 0
    n_people = len(values) // per_participant
    buckets: list[list[tuple[str, int, int | None]]] = [[] for _ in range(n_people)]
    for i, v in enumerate(values):
        buckets[i // per_participant].append((emotion, v, rt))
    return [Rated(condition=condition, items=b) for b in buckets]


def two_conditions_rated() -> list:
    """100 people for human (30/50/20 Bad/Okay/Good) and 100 for gpt4 (20/40/40): a clear, small difference."""
    return participants_from_counts("human", {1: 30, 2: 50, 3: 20}) + participants_from_counts(
        "gpt4", {1: 20, 2: 40, 3: 40}
    )


def two_emotions_rated() -> list:
    """For each of sad and joyful, 50 people for human (10/20/20) and 50 for gpt4 (5/15/30)."""
    people = []
    for emotion in ("sad", "joyful"):
        people += participants_from_counts("human", {1: 10, 2: 20, 3: 20}, emotion=emotion)
        people += participants_from_counts("gpt4", {1: 5, 2: 15, 3: 30}, emotion=emotion)
    return people
