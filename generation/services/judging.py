"""An LLM judge rating a study's responses on the study's scale, through the same machinery as generation.

* What is sent: the judge's rubric filled with the response's fields ({situation}, {speaker_utterance},
  {emotion}, {response}, {scale}: the study's labels in its order), its system prompt and decoding settings. With
  a seed, sample k is sent seed + k so that samples of one response may differ.
* Reading the reply (`reply_value`): the one scale label it names, case-insensitively and whatever the
  punctuation or mark-up around it ("Good.", "**Okay**", "Rating: bad"); a label inside a longer label that also
  matches counts once ("Very good" on a scale with both). A reply naming no label or several is an error of kind
  `unparseable`, transient: retried like a timeout, up to the provider's max_attempts, then the rating fails
  with the reply quoted.
* Exactly once per (judge, response, sample): the JudgeRating row is the unit of work. A worker claims it with a
  conditional UPDATE (`running.row_claim`); its value is stored by one conditional UPDATE that matches only while
  that worker's claim token still holds the row, so two workers racing (a redelivered task, an expired lease
  taken over) store one value. Every call's tokens and cost are added to the row's spend, stored or not — a
  reply refused after it came (malformed, empty, naming no label) included, with the usage it reported.
* The retry policy, the loop, the rate limits and the classified errors are generation's own
  (`running.retry_decision` / `held_settle` / `run_until_settled`, `providers.provider_complete`).
* Screening: a judge with `screens_new_conditions` rates each generated response as it is stored
  (`screening_enqueue`, a hook `running.response_store` calls in its transaction; apps.py registers it).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from generation.judge_formats import judge_format_of, reply_value
from generation.judge_models import Judge, JudgeRating, rubric_validate
from generation.providers import (
    Completion,
    PermanentProviderError,
    ProviderError,
    TransientProviderError,
    batch_api_of,
    cost_compute,
    provider_api_key,
    provider_request_build,
    tokens_estimate,
)
from generation.services.dispatch import tasks_dispatch
from generation.services.prompts import prompt_fields
from generation.services.running import (
    RunOutcome,
    held_call,
    held_settle,
    lease_cutoff,
    row_claim,
    run_until_settled,
)
from studies.models import Condition, Response, Study

logger = logging.getLogger(__name__)
Status = JudgeRating.Status
JUDGE_RATING_TASK = "generation.tasks.judge_rating"  # registered by generation/tasks.py


class JudgeSetupError(Exception):
    """The judge cannot run; the message says what to fix. Nothing was written."""


# --- what is sent ---------------------------------------------------------------------------------------------


def scale_text(study: Study) -> str:
    return ", ".join(str(option["label"]) for option in study.scale)


def judge_render(
    *, judge: Judge, response: Response, versus: Response | None = None
) -> tuple[str, list[dict]]:
    """The system prompt and messages the judge sends for a response (with `versus`: the pair, `response` shown
    as A), filled by the study kind's judge format (ValidationError for a bad rubric)."""
    form = judge_format_of(judge.study)
    rubric_validate(judge.rubric, placeholders=form.placeholders)
    fields = {
        **prompt_fields(response.prompt),
        **form.fields(study=judge.study, response=response, versus=versus),
    }
    return judge.system_prompt, [{"role": "user", "content": judge.rubric.format_map(fields)}]


def judge_params(judge: Judge, sample_index: int) -> dict:
    return {
        "temperature": judge.temperature,
        "max_tokens": judge.max_tokens,
        "seed": None if judge.seed is None else judge.seed + sample_index,
    }


def judge_request(
    *, judge: Judge, response: Response, sample_index: int, versus: Response | None = None
) -> dict:
    """The exact request body for one rating, as the provider's adapter builds it (batch lines use it)."""
    system, messages = judge_render(judge=judge, response=response, versus=versus)
    return provider_request_build(
        provider=judge.provider,
        model=judge.model,
        system=system,
        messages=messages,
        params=judge_params(judge, sample_index),
    )


def judge_example(*, judge: Judge) -> tuple[str, list[dict]] | None:
    """What the judge sends for the study's first unit (its first response, or first pair), or None when the study
    has nothing to judge yet; ValidationError for a bad rubric. Sends nothing."""
    units = judge_format_of(judge.study).units(study=judge.study)
    if not units:
        return None
    response_id, versus_id = units[0]
    replies = (
        Response.objects.filter(id__in=[response_id, versus_id]).select_related("prompt__emotion").in_bulk()
    )
    return judge_render(judge=judge, response=replies[response_id], versus=replies.get(versus_id))


# reply_value (the scale's reading) lives with the formats; importable from here as before.
__all__ = ["reply_value"]


# --- checks, enqueueing, dispatch -----------------------------------------------------------------------------


def judge_problems(*, judge: Judge) -> list[str]:
    """Everything that stops this judge from rating, one sentence each."""
    problems = []
    form = judge_format_of(judge.study)
    try:
        rubric_validate(judge.rubric, placeholders=form.placeholders)
    except ValidationError as exc:
        problems.append(f"Judge {judge.name}: rubric: {' '.join(exc.messages)}")
    for problem in form.problems(judge.study):
        problems.append(f"Judge {judge.name}: {problem}.")
    try:
        provider_api_key(judge.provider)
    except PermanentProviderError as exc:
        problems.append(f"Judge {judge.name}: {exc.message}.")
    return problems


def judge_conditions(*, judge: Judge, names: list[str] | None) -> list[Condition]:
    """The study's conditions named (all when None); JudgeSetupError naming the choices otherwise."""
    conditions = list(judge.study.conditions.order_by("position", "name"))
    if not names:
        return conditions
    unknown = [n for n in names if n not in {c.name for c in conditions}]
    if unknown:
        raise JudgeSetupError(
            f"Study {judge.study.slug} has no condition named {', '.join(map(repr, unknown))} "
            f"(its conditions: {', '.join(c.name for c in conditions) or 'none'})."
        )
    return [c for c in conditions if c.name in names]


def judge_enqueue(*, judge: Judge, conditions: list[Condition] | None = None, responses=None) -> int:
    """Create the missing rating rows (one per unit × sample) of the study's units (its kind's judge format:
    responses, or pairs of replies in both orders) in these conditions, or showing the given responses. Idempotent: existing rows are left as they are. Returns how many were new."""
    chosen = None if responses is None else set(responses.values_list("id", flat=True))
    units = judge_format_of(judge.study).units(study=judge.study, conditions=conditions, responses=chosen)
    before = JudgeRating.objects.filter(judge=judge).count()
    JudgeRating.objects.bulk_create(
        [
            JudgeRating(judge=judge, response_id=response_id, versus_id=versus_id, sample_index=sample)
            for response_id, versus_id in units
            for sample in range(judge.n_samples)
        ],
        ignore_conflicts=True,
        batch_size=2000,
    )
    created = JudgeRating.objects.filter(judge=judge).count() - before
    if created >= 1000 and connection.vendor == "postgresql":
        # Thousands of rows at once leave the planner's statistics where they were until autovacuum comes by:
        # the run's first queries over them (the Batch API's send) would be planned for an empty table.
        with connection.cursor() as cursor:
            for model in (JudgeRating, Response):
                cursor.execute(f'ANALYZE "{model._meta.db_table}"')
    return created


def _open(judge: Judge, conditions: list[Condition] | None):
    rows = JudgeRating.objects.filter(judge=judge)
    if conditions is not None:
        rows = rows.filter(response__condition__in=conditions)
    return rows.filter(Q(status=Status.PENDING) | Q(status=Status.RUNNING, claimed_at__lt=lease_cutoff()))


def judge_dispatch(*, rating_ids: list[int]) -> None:
    """Hand ratings to the workers, or to background threads without a broker (dispatch.tasks_dispatch)."""
    tasks_dispatch(
        task_name=JUDGE_RATING_TASK,
        run_here=judge_rating_run_until_settled,
        arg_lists=[(rating_id,) for rating_id in rating_ids],
    )


@dataclass
class JudgeStart:
    created: int = 0
    rating_ids: list[int] = field(default_factory=list)


def judge_start(
    *, judge: Judge, conditions: list[Condition] | None = None, dispatch: bool = True
) -> JudgeStart:
    """Create the missing rating rows and dispatch every one not yet settled (after commit; dispatch=False: the
    caller runs them). Idempotent: running it again resumes. JudgeSetupError (nothing written) when the judge
    cannot run."""
    problems = judge_problems(judge=judge)
    if problems:
        raise JudgeSetupError(" ".join(problems))
    with transaction.atomic():
        created = judge_enqueue(judge=judge, conditions=conditions)
        ids = list(
            _open(judge, conditions).order_by("response_id", "sample_index").values_list("id", flat=True)
        )
        if dispatch:
            transaction.on_commit(lambda: judge_dispatch(rating_ids=ids))
    return JudgeStart(created=created, rating_ids=ids)


def judge_retry_failed(
    *, judge: Judge, conditions: list[Condition] | None = None, dispatch: bool = True
) -> list[int]:
    """Give every failed rating a fresh set of attempts (JudgeSetupError first if the judge still cannot run)."""
    problems = judge_problems(judge=judge)
    if problems:
        raise JudgeSetupError(" ".join(problems))
    rows = JudgeRating.objects.filter(judge=judge, status=Status.FAILED)
    if conditions is not None:
        rows = rows.filter(response__condition__in=conditions)
    with transaction.atomic():
        ids = list(rows.values_list("id", flat=True))
        JudgeRating.objects.filter(id__in=ids, status=Status.FAILED).update(
            status=Status.PENDING, attempts=0, last_error="", error_kind="", next_attempt_at=None
        )
        if dispatch:
            transaction.on_commit(lambda: judge_dispatch(rating_ids=ids))
    return ids


def judge_sweep() -> int:
    """Re-dispatch ratings whose worker died mid-call (lease expired) and pending ones whose retry message was
    lost (due long ago). Safe any time: claiming decides who works."""
    grace = lease_cutoff()
    ids = list(
        JudgeRating.objects.filter(
            Q(status=Status.RUNNING, claimed_at__lt=grace)
            | Q(status=Status.PENDING, next_attempt_at__lt=grace)
        ).values_list("id", flat=True)
    )
    judge_dispatch(rating_ids=ids)
    return len(ids)


# --- one rating ------------------------------------------------------------------------------------------------


def judge_rating_run(*, rating_id: int) -> RunOutcome:
    """Claim the rating, call the judge's provider once (outside any transaction), read the reply and store the
    value, or settle the error by the shared retry policy. Outcomes as `running.generation_item_run`'s."""
    token = uuid.uuid4().hex
    started = timezone.now()
    if not row_claim(JudgeRating.objects.filter(id=rating_id), token=token, now=started):
        return RunOutcome("skipped")
    rating = JudgeRating.objects.select_related(
        "judge__provider", "judge__study", "response__prompt__emotion", "versus"
    ).get(id=rating_id)
    judge = rating.judge
    mine = JudgeRating.objects.filter(id=rating_id, claim_token=token, status=Status.RUNNING)
    try:
        system, messages = judge_render(judge=judge, response=rating.response, versus=rating.versus)
    except ValidationError as exc:
        mine.update(
            status=Status.FAILED, error_kind="rubric", last_error=" ".join(exc.messages), claim_token=""
        )
        return RunOutcome("failed", message="bad rubric")
    try:
        completion = held_call(
            mine,
            provider=judge.provider,
            model=judge.model,
            system=system,
            messages=messages,
            params=judge_params(judge, rating.sample_index),
        )
    except ProviderError as exc:
        # Answered, then refused (a malformed body, an empty reply): what the reply said it used is spent.
        JudgeRating.objects.filter(id=rating_id).update(
            **spend_of(usage_in=exc.usage_in, usage_out=exc.usage_out, cost=exc.cost)
        )
        return held_settle(mine, error=exc, attempt=rating.attempts, max_attempts=judge.provider.max_attempts)
    if isinstance(completion, RunOutcome):
        return completion
    return judge_reply_store(rating=rating, token=token, completion=completion, batch_id="")


def spend_of(*, usage_in: int | None, usage_out: int | None, cost) -> dict:
    """The UPDATE that adds one call's tokens and cost to a rating's spend (every call counts, stored or not)."""
    return {
        "cost": F("cost") + cost,
        "spent_input_tokens": F("spent_input_tokens") + int(usage_in or 0),
        "spent_output_tokens": F("spent_output_tokens") + int(usage_out or 0),
    }


def judge_reply_store(
    *, rating: JudgeRating, token: str, completion: Completion, batch_id: str
) -> RunOutcome:
    """Store the value a reply names, with its provenance, if `token` still holds the rating (one conditional
    UPDATE); an unparseable reply is settled by the retry policy. The call's cost is added to the rating's spend
    whatever happens."""
    judge = rating.judge
    request = dict(completion.request)
    if judge.seed is not None and "seed" not in request:
        request["_seed_not_sent"] = judge.seed + rating.sample_index  # the wire format has no seed
    spent = spend_of(usage_in=completion.usage_in, usage_out=completion.usage_out, cost=completion.cost)
    mine = JudgeRating.objects.filter(id=rating.id, claim_token=token, status=Status.RUNNING)
    try:
        value, both_inadequate = judge_format_of(judge.study).read(completion.text, study=judge.study)
    except TransientProviderError as exc:
        JudgeRating.objects.filter(id=rating.id).update(reply_text=completion.text, **spent)
        return held_settle(mine, error=exc, attempt=rating.attempts, max_attempts=judge.provider.max_attempts)
    held = mine.update(
        status=Status.DONE,
        value=value,
        both_inadequate=both_inadequate,
        reply_text=completion.text,
        request=request,
        raw_response=completion.raw_response,
        model_returned=completion.model_returned,
        provider_response_id=completion.response_id,
        provider_batch_id=batch_id,
        input_tokens=completion.usage_in,
        output_tokens=completion.usage_out,
        latency_ms=completion.latency_ms,
        rated_at=timezone.now(),
        claim_token="",
        last_error="",
        error_kind="",
        next_attempt_at=None,
        **spent,
    )
    if held:
        return RunOutcome("done")
    # Our lease expired and another worker holds (or has stored) the rating: its value stands; ours is spend.
    JudgeRating.objects.filter(id=rating.id).update(**spent)
    return RunOutcome("discarded")


def judge_rating_run_until_settled(rating_id: int, *, own_thread: bool = True) -> None:
    """One rating through the retry loop, sleeping between tries (the in-process stand-in for Celery)."""
    try:
        run_until_settled(lambda: judge_rating_run(rating_id=rating_id))
    except Exception:
        if not own_thread:
            raise
        logger.exception("in-process judging of rating %s failed", rating_id)
    finally:
        if own_thread:
            connection.close()


# --- screening -------------------------------------------------------------------------------------------------


def judge_ratings_stale(*, response: Response) -> int:
    """The response's text changed (regenerated, edited): every judge's ratings of it rated a text that is gone.
    They go back to pending (their spend stays), to be rated again. Returns how many were reset."""
    return JudgeRating.objects.filter(Q(response=response) | Q(versus=response)).update(
        status=Status.PENDING,
        value=None,
        both_inadequate=None,
        reply_text="",
        attempts=0,
        claim_token="",
        last_error="",
        error_kind="",
        rated_at=None,
    )


def screening_enqueue(*, response: Response, replaced: bool = False) -> list[int]:
    """Called as a generated response is stored (inside that transaction): every judge of the study that
    screens new conditions gets its rating rows for the response, dispatched after commit. A regenerated
    response's earlier ratings (every judge's) are reset to pending (`judge_ratings_stale`)."""
    if replaced:
        judge_ratings_stale(response=response)
    judges = list(
        Judge.objects.filter(
            study_id=response.condition.study_id, screens_new_conditions=True
        ).select_related("provider", "study")
    )
    if not judges:
        return []
    for judge in judges:
        judge_enqueue(judge=judge, responses=Response.objects.filter(id=response.id))
    rows = JudgeRating.objects.filter(
        Q(response=response) | Q(versus=response), judge__in=judges, status=Status.PENDING
    )
    ids = list(rows.values_list("id", flat=True))
    transaction.on_commit(lambda: judge_dispatch(rating_ids=ids))
    return ids


def judge_estimate(*, judge: Judge, conditions: list[Condition] | None = None) -> dict:
    """For the ratings not yet done: calls, input tokens (estimated), output tokens at most (max_tokens each) and
    the cost at most, one call at a time and through the Batch API where the provider has one. Sends nothing."""
    units = judge_format_of(judge.study).units(study=judge.study, conditions=conditions)
    done = Counter(
        JudgeRating.objects.filter(judge=judge, status=Status.DONE).values_list("response_id", "versus_id")
    )
    shown = {pk for unit in units for pk in unit if pk is not None}
    replies = Response.objects.filter(id__in=shown).select_related("prompt__emotion").in_bulk()
    calls = tokens_in = 0
    for response_id, versus_id in units:
        missing = judge.n_samples - done.get((response_id, versus_id), 0)
        if missing > 0:
            system, messages = judge_render(
                judge=judge, response=replies[response_id], versus=replies.get(versus_id)
            )
            calls += missing
            tokens_in += missing * tokens_estimate(system=system, messages=messages, max_tokens=0)
    tokens_out = calls * judge.max_tokens
    cost = cost_compute(provider=judge.provider, usage_in=tokens_in, usage_out=tokens_out)
    batch_api = batch_api_of(judge.provider)
    return {
        "calls": calls,
        "input_tokens": tokens_in,
        "output_tokens_max": tokens_out,
        "cost_max": cost,
        "batch_cost_max": cost * batch_api.price_factor if batch_api else None,
        "minutes_at_rate_limit": round(calls / judge.provider.requests_per_minute, 1),
    }
