"""Seeding the benchmark's study and reading back what was stored."""

from __future__ import annotations

import json
from pathlib import Path

from .stack import Stack, log

COMPLETION_CODE = "BENCHDONE7"


def live_study_fields(*, ask_teq: bool, quota_per_condition: int) -> dict:
    """What makes the imported study the benchmark's live Prolific study (plain values: they also go to an
    older checkout's `manage.py shell`, see `study_seed_in`)."""
    return {
        "title": "Launch benchmark",
        "state": "live",
        "platform": "prolific",
        "consent_text": "You are invited to rate how empathetic some short replies are.",
        "instructions_text": "Read each conversation and rate the reply.",
        "items_per_participant": 10,
        "quota_per_condition": quota_per_condition,
        "completion_code": COMPLETION_CODE,
        "screened_out_code": "BENCHSCREEN",
        "completion_redirect_url": "",
    }


def rating_settings_fields(*, ask_teq: bool) -> dict:
    """The benchmark study's rating settings (kinds/rating/models.py RatingSettings; Study fields in a checkout
    from before the rating kind had its own settings)."""
    return {"ask_teq": ask_teq, "target_ratings_per_response": 1}


def study_seed_in(stack: Stack, *, slug: str, corpus: Path, ask_teq: bool, quota_per_condition: int) -> None:
    """The same live study seeded by the stack's own checkout (its `manage.py`), not by this process's
    Django: for a stack running another version of the code (bench/participants.py --baseline)."""
    # The baseline checkout is from before RatingSettings: its Study still has the rating kind's fields.
    fields = {
        **live_study_fields(ask_teq=ask_teq, quota_per_condition=quota_per_condition),
        **rating_settings_fields(ask_teq=ask_teq),
    }
    log(f"importing {corpus.name} through import_corpus ({stack.root})")
    stack.manage("import_corpus", slug, str(corpus))
    stack.manage(
        "shell",
        "-c",
        "import json; from django.utils import timezone; from studies.models import Study; "
        f"Study.objects.filter(slug={slug!r}).update(**json.loads({json.dumps(fields)!r}), "
        "launched_at=timezone.now())",
    )


def study_seed(stack: Stack, *, slug: str, corpus: Path, ask_teq: bool, quota_per_condition: int) -> dict:
    """A live Prolific-style rating study with 3 conditions: the public dataset imported through the
    corpus import (2,000 prompts × human / chatgpt / chatgpt_empathy), or synthetic rows when the file
    is not on this machine."""
    from django.utils import timezone

    from kinds.rating.models import RatingSettings
    from studies.models import Condition, Emotion, Prompt, Response, Study

    if corpus.exists():
        log(f"importing {corpus.name} through import_corpus")
        stack.manage("import_corpus", slug, str(corpus))
    else:
        log(f"{corpus} not found: creating 2,000 synthetic prompts")
        study = Study.objects.create(slug=slug, title="Launch benchmark")
        emotion, _ = Emotion.objects.get_or_create(name="joyful")
        conditions = [
            Condition.objects.create(study=study, name=name, position=i)
            for i, name in enumerate(["human", "chatgpt", "chatgpt_empathy"])
        ]
        prompts = Prompt.objects.bulk_create(
            Prompt(
                study=study,
                dialogue_id=f"d{i}",
                emotion=emotion,
                situation=f"s{i}",
                speaker_utterance=f"u{i}",
            )
            for i in range(2000)
        )
        Response.objects.bulk_create(
            Response(prompt=p, condition=c, text=f"response {c.name} {p.dialogue_id}")
            for p in prompts
            for c in conditions
        )
    Study.objects.filter(slug=slug).update(
        **live_study_fields(ask_teq=ask_teq, quota_per_condition=quota_per_condition),
        launched_at=timezone.now(),
    )
    study = Study.objects.get(slug=slug)
    RatingSettings.objects.update_or_create(study=study, defaults=rating_settings_fields(ask_teq=ask_teq))
    return {
        "slug": slug,
        "conditions": list(study.conditions.values_list("name", flat=True)),
        "prompts": study.prompts.count(),
        "responses": Response.objects.filter(prompt__study=study).count(),
        "source": corpus.name if corpus.exists() else "synthetic",
    }


def outcomes_check(*, slug: str, outcomes: list, id_prefix: str = "") -> dict:
    """Compares what participants were told was saved with what the database holds (only participants
    whose external id starts with `id_prefix`, so waves of one run are checked apart)."""
    from django.db.models import Count

    from kinds.rating.models import Rating
    from studies.models import Assignment, Participant, Response, Study

    study = Study.objects.get(slug=slug)
    ratings = Rating.objects.filter(
        assignment__participant__study=study, assignment__participant__external_id__startswith=id_prefix
    )
    stored = {
        (external_id, position): value
        for external_id, position, value in ratings.values_list(
            "assignment__participant__external_id", "assignment__position", "value"
        )
    }
    lost = 0
    for outcome in outcomes:
        for answer in outcome.acknowledged:
            key = (outcome.external_id, int(answer["position"]))
            if stored.get(key) != int(answer["value"]):
                lost += 1
    duplicates = (
        ratings.values("assignment").annotate(n=Count("id")).filter(n__gt=1).count()
        + ratings.filter(assignment__kind=Assignment.Kind.RESPONSE)  # a consistency pair's repeat rates again
        .values("assignment__participant", "assignment__response")
        .annotate(n=Count("id"))
        .filter(n__gt=1, assignment__response__isnull=False)
        .count()
    )
    per_condition = dict(
        Participant.objects.filter(study=study, is_preview=False, status=Participant.Status.COMPLETED)
        .values_list("condition__name")
        .annotate(n=Count("id"))
    )
    for name in study.conditions.values_list("name", flat=True):
        per_condition.setdefault(name, 0)
    per_response = list(
        Response.objects.filter(prompt__study=study, sample_index=0)
        .annotate(n=Count("assignments__rating"))
        .values_list("n", flat=True)
    )
    rated = [n for n in per_response if n > 0]
    return {
        "participants_completed_in_db": sum(per_condition.values()),
        "ratings_stored": ratings.count(),
        "answers_acknowledged": sum(len(o.acknowledged) for o in outcomes),
        "answers_lost": lost,
        "duplicates": duplicates,
        "completed_per_condition": per_condition,
        "condition_imbalance": max(per_condition.values()) - min(per_condition.values()),
        "ratings_per_response": {
            "responses": len(per_response),
            "min": min(per_response) if per_response else None,
            "max": max(per_response) if per_response else None,
            "rated_responses": len(rated),
            "min_among_rated": min(rated) if rated else None,
            "max_among_rated": max(rated) if rated else None,
        },
    }
