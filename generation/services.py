"""Pre-generation of LLM conditions' responses: start, run one item, cancel, retry, review.

The unit of work is a GenerationItem, one per (prompt, condition, sample). Exactly-once storage rests on two
database guarantees, not on the broker:

* a worker claims an item with a conditional UPDATE (PENDING, or RUNNING with an expired lease → RUNNING with a
  fresh claim token); only the holder of the current token may store its result;
* studies.Response is unique per (prompt, condition, sample_index), so even two holders cannot store two responses.

A task delivered twice, a worker SIGKILLed mid-call, a broker redelivery: at worst a provider call is repeated
(and its cost recorded), never a response stored twice. Provider calls are made outside any transaction.
"""

from __future__ import annotations

import logging
import random
import re
import statistics
import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Q, Sum
from django.utils import timezone

from generation.models import (
    GenerationAttempt,
    GenerationItem,
    GenerationJob,
    LLMConditionConfig,
    ResponseEdit,
    ResponseProvenance,
    template_validate,
)
from generation.providers import (
    Completion,
    LimiterWait,
    PermanentProviderError,
    TransientProviderError,
    cost_compute,
    provider_api_key,
    tokens_estimate,
)
from studies.models import Condition, Prompt, Response, Study
from studies.services import study_closed_problem

logger = logging.getLogger(__name__)
Status = GenerationItem.Status


class GenerationSetupError(Exception):
    """Generation cannot start; the message names the condition and what to fix. Nothing was written."""


# --- prompts ------------------------------------------------------------------------------------------------


def prompt_fields(prompt: Prompt) -> dict[str, str]:
    return {
        "situation": prompt.situation,
        "speaker_utterance": prompt.speaker_utterance,
        "emotion": prompt.emotion.name,
    }


def config_render(*, config: LLMConditionConfig, prompt: Prompt) -> tuple[str, list[dict]]:
    """The system prompt and messages a condition sends for a prompt (its template filled with the prompt)."""
    template_validate(config.prompt_template)
    user = config.prompt_template.format_map(prompt_fields(prompt))
    return config.system_prompt, [{"role": "user", "content": user}]


def config_params(config: LLMConditionConfig) -> dict:
    return {
        "temperature": config.temperature,
        "top_p": config.top_p,
        "max_tokens": config.max_tokens,
        "seed": config.seed,
    }


# --- quality gates ------------------------------------------------------------------------------------------

_REVEALING = re.compile(
    r"\bas an? (?:ai|a\.i\.|artificial intelligence|language model|large language model|llm|chatbot|assistant)\b"
    r"|\bi(?:'|’)?m (?:just )?(?:an? )?(?:ai|a\.i\.|language model|large language model|chatbot|virtual assistant)\b"
    r"|\bi am (?:just )?(?:an? )?(?:ai|a\.i\.|language model|large language model|chatbot|virtual assistant)\b"
    r"|\b(?:i(?:'|’)?m|i am|this is) (?:claude|chatgpt|gpt-?\d\w*|gemini|bard|llama|mistral|mixtral|copilot)\b"
    r"|\b(?:created|made|trained|developed) by (?:openai|anthropic|google|meta|mistral)\b"
    r"|\bi (?:don(?:'|’)?t|do not) have (?:personal )?(?:feelings|emotions|experiences)\b",
    re.IGNORECASE,
)
WORD_RE = re.compile(r"[\w’'-]+")


def words_count(text: str) -> int:
    return len(WORD_RE.findall(text or ""))


def response_quality_flags(*, text: str, finish_reason: str = "") -> list[str]:
    """Reasons a response needs a human look: empty, truncated (stopped at max tokens), reveals_model."""
    flags = []
    if words_count(text) == 0:
        flags.append("empty")
    if finish_reason in {"length", "max_tokens", "model_length"}:
        flags.append("truncated")
    if _REVEALING.search(text or ""):
        flags.append("reveals_model")
    return flags


# --- selecting conditions and checking the set-up -----------------------------------------------------------


def generation_conditions(*, study: Study, condition_name: str | None = None) -> list[Condition]:
    """The study's LLM conditions (or the one named); GenerationSetupError naming the choices otherwise."""
    conditions = list(study.conditions.filter(kind=Condition.Kind.LLM).order_by("position", "name"))
    if condition_name:
        chosen = [c for c in conditions if c.name == condition_name]
        if not chosen:
            names = ", ".join(c.name for c in conditions) or "none"
            raise GenerationSetupError(
                f"Study {study.slug} has no LLM condition named {condition_name!r} (its LLM conditions: {names})."
            )
        return chosen
    if not conditions:
        raise GenerationSetupError(f"Study {study.slug} has no LLM condition to generate.")
    return conditions


def generation_problems(*, conditions: list[Condition]) -> list[str]:
    """Everything that stops these conditions from being generated, one sentence each, naming the condition."""
    closed = study_closed_problem(study=conditions[0].study) if conditions else None
    problems = [closed] if closed else []
    for condition in conditions:
        config = LLMConditionConfig.objects.select_related("provider").filter(condition=condition).first()
        if config is None:
            problems.append(f"Condition {condition.name}: no LLM configuration (add one in the admin).")
            continue
        try:
            template_validate(config.prompt_template)
        except ValidationError as exc:
            problems.append(f"Condition {condition.name}: prompt template: {' '.join(exc.messages)}")
        try:
            provider_api_key(config.provider)
        except PermanentProviderError as exc:
            problems.append(f"Condition {condition.name}: {exc.message}.")
    if conditions and not Prompt.objects.filter(study=conditions[0].study).exists():
        problems.append(f"Study {conditions[0].study.slug} has no prompts yet.")
    return problems


# --- estimates and examples ---------------------------------------------------------------------------------


def generation_example(*, config: LLMConditionConfig, prompt: Prompt | None = None) -> dict:
    """What would be sent for one prompt (the study's first, unless given): the exact request body."""
    from generation.providers import provider_request_build

    prompt = prompt or Prompt.objects.filter(study=config.condition.study).select_related("emotion").first()
    if prompt is None:
        return {"prompt": None, "system": config.system_prompt, "user": "", "request": None}
    system, messages = config_render(config=config, prompt=prompt)
    request = provider_request_build(
        kind=config.provider.kind,
        model=config.model,
        system=system,
        messages=messages,
        params=config_params(config),
    )
    return {"prompt": prompt, "system": system, "user": messages[0]["content"], "request": request}


def generation_estimate(*, conditions: list[Condition]) -> list[dict]:
    """Per condition, for the slots not yet generated: calls, tokens and an upper-bound cost (every reply at
    max_tokens), and the minutes the provider's request limit allows. Sends nothing."""
    rows = []
    for condition in conditions:
        config = LLMConditionConfig.objects.select_related("provider").filter(condition=condition).first()
        if config is None:
            continue
        done = set(
            Response.objects.filter(condition=condition).values_list("prompt_id", "sample_index").iterator()
        )
        prompts = list(Prompt.objects.filter(study=condition.study).select_related("emotion"))
        calls = 0
        tokens_in = 0
        for prompt in prompts:
            system, messages = config_render(config=config, prompt=prompt)
            per_call_in = tokens_estimate(system=system, messages=messages, max_tokens=0)
            for sample in range(config.n_samples):
                if (prompt.id, sample) not in done:
                    calls += 1
                    tokens_in += per_call_in
        tokens_out = calls * config.max_tokens
        provider = config.provider
        rows.append(
            {
                "condition": condition.name,
                "provider": provider.name,
                "model": config.model,
                "calls": calls,
                "input_tokens": tokens_in,
                "output_tokens_max": tokens_out,
                "cost_max": cost_compute(provider=provider, usage_in=tokens_in, usage_out=tokens_out),
                "minutes_at_rate_limit": round(calls / provider.requests_per_minute, 1),
            }
        )
    return rows


# --- start, cancel, retry -----------------------------------------------------------------------------------


@dataclass
class StartResult:
    jobs: list[GenerationJob] = field(default_factory=list)
    created: int = 0
    already_done: int = 0
    dispatched: int = 0
    item_ids: list[int] = field(default_factory=list)


def _lease_cutoff():
    return timezone.now() - timedelta(seconds=settings.GENERATION_LEASE_SECONDS)


def _dispatchable(conditions) -> list[int]:
    """Items a worker should be asked to run: pending ones, and running ones whose lease expired (their
    worker died). Ordered prompt by prompt across conditions, so every provider gets work from the start."""
    rows = (
        GenerationItem.objects.filter(condition__in=conditions)
        .filter(Q(status=Status.PENDING) | Q(status=Status.RUNNING, claimed_at__lt=_lease_cutoff()))
        .order_by("prompt_id", "sample_index", "condition_id")
        .values_list("id", flat=True)
    )
    return list(rows)


def generation_start(
    *,
    study: Study,
    conditions: list[Condition],
    started_by: str = "",
    via: str = "command",
    dispatch: bool = True,
) -> StartResult:
    """Create the missing items of these conditions and dispatch every item not yet done (after commit).

    Idempotent: starting again resumes — existing items are reused, done ones are left alone, cancelled ones
    become pending again, items whose worker died are re-dispatched. Raises GenerationSetupError (writing
    nothing) when a condition cannot be generated: no configuration, a bad template, the key variable unset."""
    problems = generation_problems(conditions=conditions)
    if problems:
        raise GenerationSetupError(" ".join(problems))
    result = StartResult()
    with transaction.atomic():  # all items of all conditions, or none
        for condition in conditions:
            config = condition.llm_config
            job = GenerationJob.objects.create(condition=condition, started_by=started_by, via=via)
            result.jobs.append(job)
            existing = set(
                GenerationItem.objects.filter(condition=condition).values_list("prompt_id", "sample_index")
            )
            responses = dict(
                (
                    ((p, s), r)
                    for p, s, r in Response.objects.filter(condition=condition).values_list(
                        "prompt_id", "sample_index", "id"
                    )
                )
            )
            new_items = []
            for prompt_id in Prompt.objects.filter(study=study).values_list("id", flat=True):
                for sample in range(config.n_samples):
                    if (prompt_id, sample) in existing:
                        continue
                    response_id = responses.get((prompt_id, sample))
                    new_items.append(
                        GenerationItem(
                            condition=condition,
                            prompt_id=prompt_id,
                            sample_index=sample,
                            job=job,
                            status=Status.DONE if response_id else Status.PENDING,
                            response_id=response_id,
                        )
                    )
                    result.already_done += bool(response_id)
            GenerationItem.objects.bulk_create(new_items, ignore_conflicts=True, batch_size=1000)
            result.created += len(new_items)
            GenerationItem.objects.filter(condition=condition, status=Status.CANCELLED).update(
                status=Status.PENDING, job=job, updated_at=timezone.now()
            )
            GenerationItem.objects.filter(condition=condition, status=Status.PENDING).update(job=job)
        item_ids = _dispatchable(conditions)
        result.item_ids = item_ids
        if dispatch:
            result.dispatched = len(item_ids)
            transaction.on_commit(lambda: generation_dispatch(item_ids=item_ids))
    return result


def generation_cancel(*, conditions: list[Condition]) -> int:
    """Stop sending: every pending item becomes cancelled (calls already in flight finish and are stored).
    Returns how many items were cancelled; generation_start resumes them."""
    with transaction.atomic():
        cancelled = GenerationItem.objects.filter(condition__in=conditions, status=Status.PENDING).update(
            status=Status.CANCELLED, updated_at=timezone.now()
        )
        GenerationJob.objects.filter(condition__in=conditions, status=GenerationJob.Status.RUNNING).update(
            status=GenerationJob.Status.CANCELLED, cancelled_at=timezone.now()
        )
    return cancelled


def generation_retry_failed(
    *, conditions: list[Condition], started_by: str = "", via: str = "command", dispatch: bool = True
) -> list[int]:
    """Give every failed item a fresh set of attempts and dispatch it (unless dispatch=False: the caller runs
    them). Raises GenerationSetupError first if the set-up is still broken (e.g. the key variable is still
    unset). Returns the retried items' ids."""
    problems = generation_problems(conditions=conditions)
    if problems:
        raise GenerationSetupError(" ".join(problems))
    with transaction.atomic():
        ids = list(
            GenerationItem.objects.filter(condition__in=conditions, status=Status.FAILED).values_list(
                "id", flat=True
            )
        )
        GenerationItem.objects.filter(id__in=ids, status=Status.FAILED).update(
            status=Status.PENDING,
            attempts=0,
            last_error="",
            error_kind="",
            next_attempt_at=None,
            updated_at=timezone.now(),
        )
        for condition in conditions:
            GenerationJob.objects.create(condition=condition, started_by=started_by, via=via)
        if dispatch:
            transaction.on_commit(lambda: generation_dispatch(item_ids=ids))
    return ids


def generation_sweep(*, conditions: list[Condition] | None = None) -> int:
    """Re-dispatch items whose worker died mid-call (lease expired) and pending items whose retry message was
    lost (due long ago). Safe to run any time: claiming decides who works. Returns how many were dispatched."""
    grace = _lease_cutoff()
    items = GenerationItem.objects.filter(
        Q(status=Status.RUNNING, claimed_at__lt=grace) | Q(status=Status.PENDING, next_attempt_at__lt=grace)
    )
    if conditions is not None:
        items = items.filter(condition__in=conditions)
    ids = list(items.values_list("id", flat=True))
    generation_dispatch(item_ids=ids)
    return len(ids)


# --- dispatch -----------------------------------------------------------------------------------------------

_local_executor: ThreadPoolExecutor | None = None
_local_lock = threading.Lock()


def tasks_run_in_process() -> bool:
    from config.celery import app

    return bool(app.conf.task_always_eager)


def local_executor() -> ThreadPoolExecutor:
    """The background threads that run generation in the web process when there is no broker."""
    global _local_executor
    with _local_lock:
        if _local_executor is None:
            _local_executor = ThreadPoolExecutor(
                max_workers=settings.GENERATION_LOCAL_THREADS, thread_name_prefix="generation"
            )
    return _local_executor


def tasks_dispatch(*, task, run_here, arg_lists: list[tuple]) -> None:
    """Send `task` once per argument tuple to the generation workers (Celery, on GENERATION_QUEUE, one broker
    connection for the batch). Without a broker (`make run`), call `run_here(*args)` on background threads of
    this process instead, so a request that starts the work returns at once."""
    if not arg_lists:
        return
    if tasks_run_in_process():
        executor = local_executor()
        for args in arg_lists:
            executor.submit(run_here, *args)
        return
    from config.celery import app

    with app.producer_or_acquire() as producer:
        for args in arg_lists:
            task.apply_async(args, queue=settings.GENERATION_QUEUE, producer=producer)


def generation_dispatch(*, item_ids: list[int]) -> None:
    """Hand items to the workers, or to background threads without a broker (see `tasks_dispatch`)."""
    from generation.tasks import generate_item

    tasks_dispatch(
        task=generate_item, run_here=_run_until_settled, arg_lists=[(item_id,) for item_id in item_ids]
    )


def _run_until_settled(item_id: int, *, own_thread: bool = True) -> None:
    """Run one item, sleeping through its retries (the in-process stand-in for Celery). On a thread of its
    own (own_thread) it closes its database connection when done and logs instead of raising."""
    import time

    try:
        while True:
            outcome = generation_item_run(item_id=item_id)
            if outcome.status != "retry":
                return
            time.sleep(outcome.countdown)
    except Exception:
        if not own_thread:
            raise
        # A background thread has nobody to raise to: log it; the item stays claimable after its lease.
        logger.exception("in-process generation of item %s failed", item_id)
    finally:
        if own_thread:
            connection.close()


def generation_run_in_process(*, item_ids: list[int], threads: int, on_settled=None) -> None:
    """Run items in this process and return when each has settled (done, failed, skipped). threads <= 1: one
    after the other in the calling thread; otherwise on a pool of threads. The provider limits still hold."""
    if threads <= 1:
        for item_id in item_ids:
            _run_until_settled(item_id, own_thread=False)
            if on_settled:
                on_settled()
        return
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="generation") as pool:
        futures = [pool.submit(_run_until_settled, item_id) for item_id in item_ids]
        for future in futures:
            future.result()
            if on_settled:
                on_settled()


# --- running one item ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunOutcome:
    status: str  # done | retry | failed | skipped | discarded
    countdown: float = 0.0
    message: str = ""


def backoff_seconds(*, attempt: int, retry_after: float | None) -> float:
    """Exponential backoff with jitter; a provider's Retry-After is a floor (jitter only adds to it)."""
    base = settings.GENERATION_BACKOFF_BASE * (2 ** max(attempt - 1, 0))
    delay = min(base, settings.GENERATION_BACKOFF_CAP)
    if retry_after is not None:
        delay = retry_after
    return delay * random.uniform(1.0, 1.25)


def _record_attempt(item_id, number, outcome, started, *, error=None, latency_ms=None):
    GenerationAttempt.objects.create(
        item_id=item_id,
        number=number,
        outcome=outcome,
        error_kind=getattr(error, "kind", "") or "",
        error=str(error)[:2000] if error else "",
        http_status=getattr(error, "http_status", None),
        retry_after=getattr(error, "retry_after", None),
        latency_ms=latency_ms,
        started_at=started,
        finished_at=timezone.now(),
    )


def generation_item_run(*, item_id: int) -> RunOutcome:
    """Claim the item, call its provider once (outside any transaction) and record what happened.

    Returns done (stored), retry (after `countdown` seconds: a transient error below the provider's
    max_attempts, or the limiter asking to wait — that one does not count as an attempt), failed (permanent
    error, or attempts used up: the reason is stored on the item), skipped (not claimable: done, failed,
    cancelled, or running elsewhere) or discarded (our lease had expired and another worker took over)."""
    from generation.providers import provider_complete

    token = uuid.uuid4().hex
    started = timezone.now()
    claimed = (
        GenerationItem.objects.filter(id=item_id)
        .filter(Q(status=Status.PENDING) | Q(status=Status.RUNNING, claimed_at__lt=_lease_cutoff()))
        .update(status=Status.RUNNING, claim_token=token, claimed_at=started, attempts=F("attempts") + 1)
    )
    if not claimed:
        return RunOutcome("skipped")
    item = GenerationItem.objects.select_related(
        "condition__study", "prompt__emotion", "condition__llm_config__provider"
    ).get(id=item_id)
    mine = GenerationItem.objects.filter(id=item_id, claim_token=token, status=Status.RUNNING)
    try:
        config = item.condition.llm_config
    except LLMConditionConfig.DoesNotExist:
        mine.update(
            status=Status.FAILED, error_kind="no_config", last_error="the condition has no LLM configuration"
        )
        return RunOutcome("failed", message="no configuration")
    provider = config.provider
    try:
        system, messages = config_render(config=config, prompt=item.prompt)
    except ValidationError as exc:
        mine.update(status=Status.FAILED, error_kind="template", last_error=" ".join(exc.messages))
        return RunOutcome("failed", message="bad template")

    try:
        completion = provider_complete(
            provider=provider,
            model=config.model,
            system=system,
            messages=messages,
            params=config_params(config),
            max_wait=settings.GENERATION_MAX_LIMIT_WAIT,
        )
    except LimiterWait as wait:
        # Nothing was sent: give the item back without spending an attempt.
        mine.update(status=Status.PENDING, attempts=F("attempts") - 1, claim_token="")
        return RunOutcome("retry", countdown=wait.retry_after + random.uniform(0, 0.5), message="limiter")
    except TransientProviderError as exc:
        _record_attempt(item_id, item.attempts, GenerationAttempt.Outcome.TRANSIENT, started, error=exc)
        if item.attempts >= provider.max_attempts:
            message = f"{exc} (gave up after {item.attempts} attempts)"
            mine.update(status=Status.FAILED, error_kind=exc.kind, last_error=message, claim_token="")
            return RunOutcome("failed", message=message)
        countdown = backoff_seconds(attempt=item.attempts, retry_after=exc.retry_after)
        mine.update(
            status=Status.PENDING,
            error_kind=exc.kind,
            last_error=str(exc),
            claim_token="",
            next_attempt_at=timezone.now() + timedelta(seconds=countdown),
        )
        return RunOutcome("retry", countdown=countdown, message=str(exc))
    except PermanentProviderError as exc:
        _record_attempt(item_id, item.attempts, GenerationAttempt.Outcome.PERMANENT, started, error=exc)
        mine.update(status=Status.FAILED, error_kind=exc.kind, last_error=str(exc), claim_token="")
        return RunOutcome("failed", message=str(exc))
    return _store(item=item, token=token, completion=completion, config=config, started=started)


class _LostClaim(Exception):
    """Our lease expired and another worker holds the item now: roll back what we wrote."""


def _store(*, item: GenerationItem, token: str, completion: Completion, config, started) -> RunOutcome:
    """Write the response, its provenance and the item's new state in one transaction, if we still hold it.

    The last statement is a conditional UPDATE on the item (our claim token, still running): if another worker
    took the item over after our lease expired, it matches nothing and everything is rolled back. Two holders
    inserting the same slot meet at Response's unique (prompt, condition, sample): the second waits for the first
    and then fails. Either way the losing call is recorded as discarded (with its cost), never stored."""
    flags = response_quality_flags(text=completion.text, finish_reason=completion.finish_reason)
    provider = config.provider
    review = Response.Review.FLAGGED if flags else Response.Review.OK
    request = dict(completion.request)
    if config.seed is not None and "seed" not in request:
        request["_seed_not_sent"] = config.seed  # the provider has no seed parameter; recorded, not sent
    try:
        with transaction.atomic():
            if item.regenerate and item.response_id:
                response = Response.objects.select_for_update().get(id=item.response_id)
                response.text = completion.text
                response.source = Response.Source.GENERATED
                response.review = review
                response.review_flags = flags
                response.save(update_fields=["text", "source", "review", "review_flags", "updated_at"])
                ResponseProvenance.objects.filter(response=response, superseded_at__isnull=True).update(
                    superseded_at=timezone.now()
                )
            else:
                response = Response.objects.create(
                    prompt_id=item.prompt_id,
                    condition_id=item.condition_id,
                    sample_index=item.sample_index,
                    text=completion.text,
                    source=Response.Source.GENERATED,
                    review=review,
                    review_flags=flags,
                )
            ResponseProvenance.objects.create(
                response=response,
                item_id=item.id,
                provider_name=provider.name,
                provider_kind=provider.kind,
                base_url=provider.base_url,
                model_requested=config.model,
                model_returned=completion.model_returned,
                system_fingerprint=completion.system_fingerprint,
                provider_response_id=completion.response_id,
                finish_reason=completion.finish_reason,
                request=request,
                raw_response=completion.raw_response,
                input_tokens=completion.usage_in,
                output_tokens=completion.usage_out,
                cost=completion.cost,
                latency_ms=completion.latency_ms,
                attempts=item.attempts,
                requested_at=started,
                completed_at=timezone.now(),
            )
            _record_attempt(
                item.id,
                item.attempts,
                GenerationAttempt.Outcome.STORED,
                started,
                latency_ms=completion.latency_ms,
            )
            held = GenerationItem.objects.filter(id=item.id, claim_token=token, status=Status.RUNNING).update(
                status=Status.DONE,
                response=response,
                regenerate=False,
                claim_token="",
                last_error="",
                error_kind="",
                next_attempt_at=None,
                cost=F("cost") + completion.cost,
                updated_at=timezone.now(),
            )
            if not held:
                raise _LostClaim
    except _LostClaim:
        pass
    except IntegrityError:
        # The slot is already filled (by the worker that took over, or another path): keep that response.
        existing = Response.objects.filter(
            prompt_id=item.prompt_id, condition_id=item.condition_id, sample_index=item.sample_index
        ).first()
        GenerationItem.objects.filter(id=item.id, claim_token=token, status=Status.RUNNING).update(
            status=Status.DONE, response=existing, claim_token="", last_error="", error_kind=""
        )
    else:
        return RunOutcome("done")
    GenerationItem.objects.filter(id=item.id).update(cost=F("cost") + completion.cost)
    _record_attempt(
        item.id, item.attempts, GenerationAttempt.Outcome.DISCARDED, started, latency_ms=completion.latency_ms
    )
    return RunOutcome("discarded")


# --- review -------------------------------------------------------------------------------------------------


def response_approve(*, response: Response) -> None:
    """Mark a flagged response as reviewed and fine (its flags stay, for the record)."""
    Response.objects.filter(id=response.id).update(review=Response.Review.APPROVED, updated_at=timezone.now())


def response_edit(*, response: Response, text: str, user, note: str = "") -> ResponseEdit | None:
    """Replace a response's text, keeping who changed what and when (ResponseEdit). The response becomes
    source=edited and approved. No-op (None) if the text is unchanged; ValidationError if it is empty."""
    text = (text or "").strip()
    if not text:
        raise ValidationError("A response cannot be empty.")
    with transaction.atomic():
        locked = Response.objects.select_for_update().get(id=response.id)
        if locked.text == text:
            return None
        edit = ResponseEdit.objects.create(
            response=locked,
            editor=user,
            editor_username=getattr(user, "username", "") or "",
            before=locked.text,
            after=text,
            note=note,
        )
        locked.text = text
        locked.source = Response.Source.EDITED
        locked.review = Response.Review.APPROVED
        locked.save(update_fields=["text", "source", "review", "updated_at"])
    return edit


def response_regenerate(*, response: Response) -> None:
    """Ask the provider again for this response's slot; the new text replaces the old when it arrives (the old
    provenance is kept, marked superseded). Refused (ValidationError) for a response participants have seen,
    one not generated here, or one whose generation is running."""
    if response.assignments.exists():
        raise ValidationError(
            f"Response {response.id} has been shown to participants; it cannot be regenerated."
        )
    with transaction.atomic():
        item = GenerationItem.objects.select_for_update().filter(response=response).first()
        if item is None:
            raise ValidationError(
                f"Response {response.id} was not generated here, so it cannot be regenerated."
            )
        if item.status in (Status.RUNNING, Status.PENDING):
            raise ValidationError(f"Response {response.id} is already being generated.")
        problems = generation_problems(conditions=[item.condition])
        if problems:
            raise ValidationError(" ".join(problems))
        GenerationItem.objects.filter(id=item.id).update(
            status=Status.PENDING,
            regenerate=True,
            attempts=0,
            last_error="",
            error_kind="",
            updated_at=timezone.now(),
        )
        transaction.on_commit(lambda: generation_dispatch(item_ids=[item.id]))


# --- reading ------------------------------------------------------------------------------------------------


def generation_unsettled(*, conditions: list[Condition]) -> int:
    """Items still pending or running (what a caller waits for)."""
    return GenerationItem.objects.filter(
        condition__in=conditions, status__in=[Status.PENDING, Status.RUNNING]
    ).count()


def generation_progress(*, study: Study) -> list[dict]:
    """Per LLM condition: slots (prompts × samples), done / running / pending / failed / cancelled / not started,
    spend so far (USD), responses flagged for review, and the most common errors."""
    n_prompts = Prompt.objects.filter(study=study).count()
    rows = []
    for condition in study.conditions.filter(kind=Condition.Kind.LLM).order_by("position", "name"):
        config = LLMConditionConfig.objects.select_related("provider").filter(condition=condition).first()
        slots = n_prompts * (config.n_samples if config else 1)
        counts = dict(
            GenerationItem.objects.filter(condition=condition)
            .values_list("status")
            .annotate(n=Count("id"))
            .values_list("status", "n")
        )
        spend = GenerationItem.objects.filter(condition=condition).aggregate(s=Sum("cost"))["s"] or Decimal(0)
        errors = Counter(
            GenerationItem.objects.filter(condition=condition, status=Status.FAILED).values_list(
                "last_error", flat=True
            )
        ).most_common(3)
        stored = Response.objects.filter(condition=condition).count()
        rows.append(
            {
                "condition": condition,
                "name": condition.name,
                "config": config,
                "slots": slots,
                "responses": stored,
                "done": counts.get(Status.DONE, 0),
                "running": counts.get(Status.RUNNING, 0),
                "pending": counts.get(Status.PENDING, 0),
                "failed": counts.get(Status.FAILED, 0),
                "cancelled": counts.get(Status.CANCELLED, 0),
                "not_started": max(slots - sum(counts.values()), 0),
                "spend": spend,
                "flagged": Response.objects.filter(
                    condition=condition, review=Response.Review.FLAGGED
                ).count(),
                "errors": errors,
                "percent": round(100 * counts.get(Status.DONE, 0) / slots) if slots else 0,
            }
        )
    return rows


def response_length_stats(*, study: Study) -> list[dict]:
    """Words per response for every condition (human baseline included): n, mean, median, SD. The seed
    study found LLM responses up to twice as long as the human ones — a confound worth reporting."""
    rows = []
    for condition in study.conditions.order_by("position", "name"):
        lengths = [
            words_count(t)
            for t in Response.objects.filter(condition=condition).values_list("text", flat=True)
        ]
        rows.append(
            {
                "condition": condition.name,
                "kind": condition.kind,
                "baseline": condition.is_baseline or condition.kind == Condition.Kind.HUMAN,
                "n": len(lengths),
                "mean": round(statistics.fmean(lengths), 1) if lengths else None,
                "median": statistics.median(lengths) if lengths else None,
                "sd": round(statistics.stdev(lengths), 1) if len(lengths) > 1 else None,
            }
        )
    return rows


PROVENANCE_COLUMNS = [
    "study",
    "condition",
    "dialogue_id",
    "sample_index",
    "response_id",
    "text",
    "source",
    "review",
    "review_flags",
    "edited",
    "provider",
    "provider_kind",
    "base_url",
    "model_requested",
    "model_returned",
    "system_fingerprint",
    "provider_response_id",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "latency_ms",
    "attempts",
    "requested_at",
    "completed_at",
    "superseded_at",
    "request_json",
    "raw_response_json",
]


def provenance_rows(*, study: Study, include_superseded: bool = False):
    """One row per generated response (PROVENANCE_COLUMNS): what was asked, of which model, what came back,
    usage, cost, latency, attempts, timestamps. For exports; holds no key (only bodies were ever stored)."""
    import json

    queryset = (
        ResponseProvenance.objects.filter(response__condition__study=study)
        .select_related("response__condition", "response__prompt")
        .annotate(n_edits=Count("response__edits"))
        .order_by(
            "response__condition__position", "response__condition__name", "response__prompt_id", "created_at"
        )
    )
    if not include_superseded:
        queryset = queryset.filter(superseded_at__isnull=True)
    for row in queryset.iterator(chunk_size=500):
        response = row.response
        yield {
            "study": study.slug,
            "condition": response.condition.name,
            "dialogue_id": response.prompt.dialogue_id,
            "sample_index": response.sample_index,
            "response_id": response.id,
            "text": response.text,
            "source": response.source,
            "review": response.review,
            "review_flags": ";".join(response.review_flags or []),
            "edited": row.n_edits > 0,
            "provider": row.provider_name,
            "provider_kind": row.provider_kind,
            "base_url": row.base_url,
            "model_requested": row.model_requested,
            "model_returned": row.model_returned,
            "system_fingerprint": row.system_fingerprint,
            "provider_response_id": row.provider_response_id,
            "finish_reason": row.finish_reason,
            "input_tokens": row.input_tokens,
            "output_tokens": row.output_tokens,
            "cost_usd": f"{row.cost:.8f}",
            "latency_ms": row.latency_ms,
            "attempts": row.attempts,
            "requested_at": row.requested_at.isoformat(),
            "completed_at": row.completed_at.isoformat(),
            "superseded_at": row.superseded_at.isoformat() if row.superseded_at else "",
            "request_json": json.dumps(row.request, ensure_ascii=False, sort_keys=True),
            "raw_response_json": json.dumps(row.raw_response, ensure_ascii=False, sort_keys=True),
        }


def provenance_export(*, study: Study, path, include_superseded: bool = False) -> int:
    """Write provenance_rows to a CSV (or JSON Lines if the path ends in .jsonl). Returns the row count."""
    import csv
    import json

    count = 0
    with open(path, "w", newline="", encoding="utf-8") as handle:
        if str(path).endswith(".jsonl"):
            for row in provenance_rows(study=study, include_superseded=include_superseded):
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
                count += 1
        else:
            writer = csv.DictWriter(handle, fieldnames=PROVENANCE_COLUMNS)
            writer.writeheader()
            for row in provenance_rows(study=study, include_superseded=include_superseded):
                writer.writerow(row)
                count += 1
    return count
