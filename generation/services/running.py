"""Running one generation item, storing its response, and the one retry policy every provider caller shares.

Exactly-once storage rests on two database guarantees, not on the broker:

* a worker claims an item with a conditional UPDATE (PENDING, or RUNNING with an expired lease → RUNNING with a
  fresh claim token); only the holder of the current token may store its result;
* studies.Response is unique per (prompt, condition, sample_index), so even two holders cannot store two responses.

A task delivered twice, a worker SIGKILLed mid-call, a broker redelivery: at worst a provider call is repeated
(and its cost recorded), never a response stored twice. Provider calls are made outside any transaction.

The retry policy (`retry_decision`: a permanent error fails at once; a transient one is retried after an
exponential backoff with jitter, the provider's Retry-After as a floor, until the provider's max_attempts) and
the loop that waits it out (`run_until_settled`) are used by the synchronous items (Celery task and in-process
runner), by the Batch API's collection (a transient line error is decided here and the item goes back to the
loop) and by the questionnaire's LLM subjects.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from generation.models import (
    GenerationAttempt,
    GenerationItem,
    GenerationJob,
    LLMConditionConfig,
    ResponseProvenance,
)
from generation.providers import (
    Completion,
    LimiterWait,
    PermanentProviderError,
    ProviderError,
    provider_complete,
)
from generation.services.prompts import config_params, config_render, response_quality_flags
from studies.fields import newlines_normalise
from studies.models import Response
from studies.reply_review import reply_fingerprint, same_replies_flag

#: The flag of a regenerated response whose new text is the old one again.
SAME_TEXT_FLAG = "same_text_again"
#: The flag of a reply (nearly) identical to the condition's replies to other prompts: a canned answer.
DUPLICATE_FLAG = "same_as_other_replies"

logger = logging.getLogger(__name__)
Status = GenerationItem.Status


@dataclass(frozen=True)
class RunOutcome:
    status: str  # done | retry | failed | skipped | discarded
    countdown: float = 0.0
    message: str = ""


def lease_cutoff():
    """Running items claimed before this are taken to have lost their worker."""
    return timezone.now() - timedelta(seconds=settings.GENERATION_LEASE_SECONDS)


# --- the retry policy and its loop --------------------------------------------------------------------------


def backoff_seconds(*, attempt: int, retry_after: float | None, base: float | None = None) -> float:
    """Exponential backoff with jitter from `base` (default GENERATION_BACKOFF_BASE), capped at
    GENERATION_BACKOFF_CAP; a provider's Retry-After is a floor (jitter only adds to it)."""
    base = settings.GENERATION_BACKOFF_BASE if base is None else base
    delay = min(base * (2 ** max(attempt - 1, 0)), settings.GENERATION_BACKOFF_CAP)
    if retry_after is not None:
        delay = retry_after
    return delay * random.uniform(1.0, 1.25)


def retry_decision(
    *, error: ProviderError, attempt: int, max_attempts: int, base: float | None = None
) -> RunOutcome:
    """After `attempt` calls failed, the last with `error`: failed (permanent, or attempts used up; the message
    says which) or retry after `countdown` seconds."""
    if isinstance(error, PermanentProviderError):
        return RunOutcome("failed", message=str(error))
    if attempt >= max_attempts:
        return RunOutcome("failed", message=f"{error} (gave up after {attempt} attempts)")
    retry_after = getattr(error, "retry_after", None)
    return RunOutcome(
        "retry",
        countdown=backoff_seconds(attempt=attempt, retry_after=retry_after, base=base),
        message=str(error),
    )


def _sleep_and_go_on(seconds: float) -> bool:
    time.sleep(seconds)
    return True


def run_until_settled(
    step: Callable[[], RunOutcome], *, wait: Callable[[float], bool] = _sleep_and_go_on
) -> RunOutcome:
    """The retry loop: run `step` until it settles (anything but "retry"). Between tries `wait(countdown)` either
    waits and returns True (go on here) or hands the retry elsewhere (a Celery message) and returns False."""
    while True:
        outcome = step()
        if outcome.status != "retry" or not wait(outcome.countdown):
            return outcome


# --- one item -----------------------------------------------------------------------------------------------


def attempt_record(item_id, number, outcome, started, *, error=None, latency_ms=None):
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


def model_has_field(model, name: str) -> bool:
    return any(field.name == name for field in model._meta.concrete_fields)


def held_settle(held, *, error: ProviderError, attempt: int, max_attempts: int) -> RunOutcome:
    """Settle a failed call of a held work row by `retry_decision`: failed with the reason, or back to pending
    with its next attempt's time. `held` is the row filtered by its claim token and running status, so nothing
    happens if the claim was lost. Shared by every kind of work row with the same bookkeeping (GenerationItem,
    JudgeRating)."""
    outcome = retry_decision(error=error, attempt=attempt, max_attempts=max_attempts)
    if outcome.status == "failed":
        stamp = {"updated_at": timezone.now()} if model_has_field(held.model, "updated_at") else {}
        held.update(
            status=Status.FAILED, error_kind=error.kind, last_error=outcome.message, claim_token="", **stamp
        )
    else:
        held.update(
            status=Status.PENDING,
            error_kind=error.kind,
            last_error=str(error),
            claim_token="",
            next_attempt_at=timezone.now() + timedelta(seconds=outcome.countdown),
        )
    return outcome


def row_claim(rows, *, token: str, now) -> int:
    """Claim a work row (conditional UPDATE: pending, or running with an expired lease → running with our token,
    one more attempt). Returns 1 if we hold it now, 0 if it is done, failed, cancelled or held elsewhere."""
    return rows.filter(
        Q(status=Status.PENDING) | Q(status=Status.RUNNING, claimed_at__lt=lease_cutoff())
    ).update(status=Status.RUNNING, claim_token=token, claimed_at=now, attempts=F("attempts") + 1)


def item_attempt_failed(
    *, item: GenerationItem, token: str, error: ProviderError, max_attempts: int, started
) -> RunOutcome:
    """Record a failed call of a held item and settle it by `retry_decision` (see `held_settle`)."""
    permanent = isinstance(error, PermanentProviderError)
    kind = GenerationAttempt.Outcome.PERMANENT if permanent else GenerationAttempt.Outcome.TRANSIENT
    attempt_record(item.id, item.attempts, kind, started, error=error)
    if error.cost:  # answered, then refused (malformed, empty, filtered): that call is paid for too
        GenerationItem.objects.filter(id=item.id).update(cost=F("cost") + error.cost)
    mine = GenerationItem.objects.filter(id=item.id, claim_token=token, status=Status.RUNNING)
    outcome = held_settle(mine, error=error, attempt=item.attempts, max_attempts=max_attempts)
    if outcome.status == "failed" and permanent:
        # Counting is idempotent: if the claim was lost meanwhile, this only recounts.
        condition_stop_if_failing(condition_id=item.condition_id, error=error)
    return outcome


def held_call(held, *, provider, model: str, system: str, messages: list[dict], params: dict):
    """Call the provider for a held work row (outside any transaction): the Completion, or, when our own limiter
    did not admit the call in time, the row given back without spending an attempt and the RunOutcome to retry.
    A classified provider error is raised for the caller to settle."""
    try:
        return provider_complete(
            provider=provider,
            model=model,
            system=system,
            messages=messages,
            params=params,
            max_wait=settings.GENERATION_MAX_LIMIT_WAIT,
        )
    except LimiterWait as wait:  # nothing was sent
        held.update(status=Status.PENDING, attempts=F("attempts") - 1, claim_token="")
        return RunOutcome("retry", countdown=wait.retry_after + random.uniform(0, 0.5), message="limiter")


# --- stopping a run that keeps failing the same way ---------------------------------------------------------

#: Permanent failures that belong to one item's text, not to the set-up: however many, they never stop a run.
ITEM_SPECIFIC_FAILURES = frozenset({"content_filter", "context_too_long"})

_STOP_HINTS = {
    "bad_key": "the key in the provider's environment variable",
    "missing_key": "the provider's key variable",
    "forbidden_key_env": "the provider's key variable",
    "model_not_found": "the model's name and the provider's base URL (an OpenAI-compatible one usually ends in /v1)",
    "quota": "the account's quota with the provider",
}


def items_stop(*, condition_ids: list[int], job_status: str, reason: str = "") -> int:
    """Cancel the pending items of these conditions and mark their running jobs `job_status` (with `reason`) in
    one transaction; calls in flight still finish. Returns how many items were cancelled (starting again
    resumes them). Safe to call twice or from two workers at once: both are conditional UPDATEs."""
    now = timezone.now()
    with transaction.atomic():
        cancelled = GenerationItem.objects.filter(
            condition_id__in=condition_ids, status=Status.PENDING
        ).update(status=Status.CANCELLED, updated_at=now)
        GenerationJob.objects.filter(
            condition_id__in=condition_ids, status=GenerationJob.Status.RUNNING
        ).update(status=job_status, cancelled_at=now, stopped_reason=reason)
    return cancelled


def condition_stop_if_failing(*, condition_id: int, error: PermanentProviderError) -> bool:
    """After an item failed permanently with `error`: if GENERATION_STOP_AFTER_SAME_FAILURES items of the
    condition's current run (since its latest start) have now failed with the same kind of error (a refused key,
    a model or path the endpoint does not serve, an exhausted quota, …), stop the run instead of spending every
    other item on the same failure; the job records why. Refusals of one item's text never stop a run.

    Every worker checks after committing its own failure, so once the threshold is reached some worker sees it."""
    if error.kind in ITEM_SPECIFIC_FAILURES:
        return False
    threshold = settings.GENERATION_STOP_AFTER_SAME_FAILURES
    if threshold <= 0:
        return False
    failed = GenerationItem.objects.filter(
        condition_id=condition_id, status=Status.FAILED, error_kind=error.kind
    )
    latest = GenerationJob.objects.filter(condition_id=condition_id).order_by("-created_at").first()
    if latest is not None:
        failed = failed.filter(updated_at__gte=latest.created_at)
    count = failed.count()
    if count < threshold:
        return False
    hint = _STOP_HINTS.get(error.kind, "what the provider refuses in the request")
    reason = (
        f"Stopped after {count} items failed the same way: {error}. Nothing more is sent for this condition "
        f"until you fix the cause (check {hint}; the provider's Test connection shows whether it answers now), "
        "then use Retry failed and Start / resume."
    )
    cancelled = items_stop(
        condition_ids=[condition_id], job_status=GenerationJob.Status.STOPPED, reason=reason
    )
    logger.warning(
        "generation stopped after repeated failures",
        extra={
            "condition_id": condition_id,
            "error_kind": error.kind,
            "failed": count,
            "cancelled": cancelled,
        },
    )
    return True


def generation_item_run(*, item_id: int) -> RunOutcome:
    """Claim the item, call its provider once (outside any transaction) and record what happened.

    Returns done (stored), retry (after `countdown` seconds: a transient error below the provider's
    max_attempts, or the limiter asking to wait — that one does not count as an attempt), failed (permanent
    error, or attempts used up: the reason is stored on the item), skipped (not claimable: done, failed,
    cancelled, or running elsewhere) or discarded (our lease had expired and another worker took over)."""
    token = uuid.uuid4().hex
    started = timezone.now()
    if not row_claim(GenerationItem.objects.filter(id=item_id), token=token, now=started):
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
    try:
        system, messages = config_render(config=config, prompt=item.prompt)
    except ValidationError as exc:
        mine.update(status=Status.FAILED, error_kind="template", last_error=" ".join(exc.messages))
        return RunOutcome("failed", message="bad template")
    try:
        completion = held_call(
            mine,
            provider=config.provider,
            model=config.model,
            system=system,
            messages=messages,
            params=config_params(config),
        )
    except ProviderError as exc:
        return item_attempt_failed(
            item=item, token=token, error=exc, max_attempts=config.provider.max_attempts, started=started
        )
    if isinstance(completion, RunOutcome):
        return completion
    return response_store(item=item, token=token, completion=completion, config=config, started=started)


def item_run_until_settled(item_id: int, *, own_thread: bool = True) -> None:
    """Run one item through the retry loop, sleeping between tries (the in-process stand-in for Celery). On a
    thread of its own (own_thread) it closes its database connection when done and logs instead of raising."""
    try:
        run_until_settled(lambda: generation_item_run(item_id=item_id))
    except Exception:
        if not own_thread:
            raise
        # A background thread has nobody to raise to: log it; the item stays claimable after its lease.
        logger.exception("in-process generation of item %s failed", item_id)
    finally:
        if own_thread:
            connection.close()


# --- storing ------------------------------------------------------------------------------------------------

#: Called inside the transaction that stores a generated response, as hook(response=..., replaced=bool): what
#: another part of generation does with a new response in the same transaction (the judge's screening enqueues
#: its ratings; generation/apps.py registers it). A hook must not call a provider.
_RESPONSE_STORED_HOOKS: list[Callable] = []


def response_stored_hook_register(hook: Callable) -> None:
    if hook not in _RESPONSE_STORED_HOOKS:
        _RESPONSE_STORED_HOOKS.append(hook)


class _LostClaim(Exception):
    """Our lease expired and another worker holds the item now: roll back what we wrote."""


def response_store(
    *, item: GenerationItem, token: str, completion: Completion, config, started
) -> RunOutcome:
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
                if newlines_normalise(response.text) == newlines_normalise(completion.text):
                    # A fixed seed (or a deterministic model) gave the same text back: say so instead of
                    # letting the reviewer regenerate it again and again.
                    flags = [*flags, SAME_TEXT_FLAG]
                    review = Response.Review.FLAGGED
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
                **ResponseProvenance.asked(provider, config.model),
                system_fingerprint=completion.system_fingerprint,
                provider_response_id=completion.response_id,
                finish_reason=completion.finish_reason,
                request=request,
                **completion.record_fields(),
                attempts=item.attempts,
                requested_at=started,
                completed_at=timezone.now(),
            )
            for hook in _RESPONSE_STORED_HOOKS:
                hook(response=response, replaced=bool(item.regenerate and item.response_id))
            attempt_record(
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
        condition_duplicates_flag_if_settled(condition_id=item.condition_id)
        same_replies_flag(study=item.condition.study_id, prompt_ids=[item.prompt_id])
        return RunOutcome("done")
    GenerationItem.objects.filter(id=item.id).update(cost=F("cost") + completion.cost)
    attempt_record(
        item.id, item.attempts, GenerationAttempt.Outcome.DISCARDED, started, latency_ms=completion.latency_ms
    )
    return RunOutcome("discarded")


# --- after a condition's run: replies that are the same whatever the prompt ---------------------------------


def condition_duplicates_flag(*, condition_id: int) -> int:
    """Flag for review every generated response of the condition whose words are those of its reply to another
    prompt (a canned reply: "I'm sorry to hear that." twenty times). Samples of one prompt may agree. Returns
    how many responses were newly flagged; one already carrying the flag (flagged, or approved by a reviewer
    since) is left as it is. The rows are locked while flagged, so two passes never flag twice."""
    groups: dict[str, set[int]] = {}
    members: dict[str, list[int]] = {}
    rows = Response.objects.filter(condition_id=condition_id, source=Response.Source.GENERATED)
    for response_id, prompt_id, text in rows.values_list("id", "prompt_id", "text").iterator(chunk_size=2000):
        key = reply_fingerprint(text)
        if key:
            groups.setdefault(key, set()).add(prompt_id)
            members.setdefault(key, []).append(response_id)
    ids = [i for key, prompts in groups.items() if len(prompts) > 1 for i in members[key]]
    flagged = 0
    with transaction.atomic():
        for response in Response.objects.select_for_update().filter(id__in=ids).order_by("id"):
            if DUPLICATE_FLAG in response.review_flags:
                continue
            response.review_flags = [*response.review_flags, DUPLICATE_FLAG]
            response.review = Response.Review.FLAGGED
            response.save(update_fields=["review", "review_flags", "updated_at"])
            flagged += 1
    return flagged


def condition_duplicates_flag_if_settled(*, condition_id: int) -> int:
    """Run `condition_duplicates_flag` once the condition has nothing left to generate (no item pending or
    running). Every worker checks after committing its own result, so the last to finish runs it."""
    if GenerationItem.objects.filter(
        condition_id=condition_id, status__in=[Status.PENDING, Status.RUNNING]
    ).exists():
        return 0
    return condition_duplicates_flag(condition_id=condition_id)
