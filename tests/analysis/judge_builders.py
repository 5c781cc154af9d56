"""Judge rows straight into the database (the runner's output, without the runner): a provider, a judge and its
ratings of a study's responses, done with a value, pending or failed."""

from __future__ import annotations

import random
from decimal import Decimal

from django.utils import timezone

from generation.models import Judge, JudgeRating, Provider
from kinds.rating.models import Rating
from studies.models import Response, Study


def judge_create(study: Study, *, name: str = "gpt-judge", n_samples: int = 1) -> Judge:
    provider, _ = Provider.objects.get_or_create(
        name="loopback", defaults={"kind": "openai", "api_key_env": "JUDGE_TEST_KEY"}
    )
    return Judge.objects.create(
        study=study, name=name, provider=provider, model="judge-model", n_samples=n_samples
    )


def human_values(study: Study) -> dict[int, int]:
    """Each rated response's first human rating (by rating id)."""
    out: dict[int, int] = {}
    for response_id, value in (
        Rating.objects.filter(assignment__participant__study=study)
        .exclude(assignment__response_id=None)
        .order_by("id")
        .values_list("assignment__response_id", "value")
    ):
        out.setdefault(response_id, value)
    return out


def judge_ratings_create(
    judge: Judge,
    *,
    agree: float = 1.0,
    screen: dict[str, dict[int, float]] | None = None,
    rate_all: tuple[str, ...] = (),
    pending: int = 0,
    failed: int = 0,
    seed: int = 0,
    cost: str = "0.0001",
) -> None:
    """The judge rates every response people rated (the person's value with probability `agree`, otherwise one of
    the other values), and every response of each condition in `screen` by the given value → probability; then
    `pending` and `failed` rows on responses of the study it has not rated. Conditions in `rate_all`: the judge
    also rates their responses nobody rated, with a value drawn from the condition's human ratings."""
    rng = random.Random(seed)
    study = judge.study
    scale = sorted(int(o["value"]) for o in study.scale)
    rows, now = [], timezone.now()
    rated = human_values(study)
    for response_id, value in rated.items():
        for s in range(judge.n_samples):
            v = value if rng.random() < agree else rng.choice([x for x in scale if x != value])
            rows.append(_done(judge, response_id, s, v, now, cost))
    for condition, dist in (screen or {}).items():
        values, weights = zip(*sorted(dist.items()), strict=True)
        for response_id in Response.objects.filter(
            condition__study=study, condition__name=condition
        ).values_list("id", flat=True):
            for s in range(judge.n_samples):
                rows.append(_done(judge, response_id, s, rng.choices(values, weights)[0], now, cost))
    by_condition: dict[str, list[int]] = {}
    for response_id, condition in Response.objects.filter(id__in=list(rated)).values_list(
        "id", "condition__name"
    ):
        by_condition.setdefault(condition, []).append(rated[response_id])
    for condition in rate_all:
        for response_id in (
            Response.objects.filter(condition__study=study, condition__name=condition)
            .exclude(id__in=list(rated))
            .values_list("id", flat=True)
        ):
            for s in range(judge.n_samples):
                rows.append(_done(judge, response_id, s, rng.choice(by_condition[condition]), now, cost))
    taken = {r.response_id for r in rows}
    spare = list(
        Response.objects.filter(condition__study=study)
        .exclude(id__in=taken)
        .order_by("id")
        .values_list("id", flat=True)
    )
    for response_id in spare[:pending]:
        rows.append(JudgeRating(judge=judge, response_id=response_id, status=JudgeRating.Status.PENDING))
    for response_id in spare[pending : pending + failed]:
        rows.append(
            JudgeRating(
                judge=judge, response_id=response_id, status=JudgeRating.Status.FAILED, last_error="HTTP 400"
            )
        )
    JudgeRating.objects.bulk_create(rows, batch_size=2000)


def _done(judge, response_id, sample, value, now, cost) -> JudgeRating:
    return JudgeRating(
        judge=judge,
        response_id=response_id,
        sample_index=sample,
        status=JudgeRating.Status.DONE,
        value=value,
        reply_text=str(value),
        input_tokens=120,
        output_tokens=1,
        cost=Decimal(cost),
        rated_at=now,
    )
