"""A judge's ratings through the provider's Batch API: thousands of responses in one upload, at the batch price.

    python manage.py judge_run <study-slug> <judge-name> --batch [--wait]

The same exactly-once rules as generation's batches (generation/batches.py), for JudgeRating rows: submitting
claims the judge's pending ratings for the batch (a conditional UPDATE: running, the batch's claim token, held
until the provider's window has passed), so no worker rates them one by one meanwhile. Collecting, under a lock on
the batch's row and only while it is submitted, stores each answered rating through the path a worker uses
(`judging.judge_reply_store`: value, reply, provenance, cost at the batch price), settles a line's error or an
unparseable reply by the one retry policy (`running.held_settle`: a refusal fails the rating with its reason; a
transient error, or an unparseable reply below the provider's max_attempts, gives it back to ordinary rating), and
gives everything else back too (lines missing from the output, a failed or expired batch). Celery beat collects
open batches every minute (`generation.tasks.judge_batches_poll_task`). No provider call inside a transaction.
"""

from __future__ import annotations

import logging
from decimal import Decimal

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from generation.batches import (
    BatchCollected,
    batch_ended_record,
    batch_record_submit,
    batch_rows_claim,
    batch_rows_held,
    batches_poll_each,
    line_completion,
)
from generation.judge_models import Judge, JudgeBatch, JudgeRating
from generation.providers import ProviderError, batch_api_of, provider_api_key
from generation.services.judging import (
    JudgeSetupError,
    judge_dispatch,
    judge_problems,
    judge_reply_store,
    judge_request,
    judge_start,
)
from generation.services.running import held_settle
from studies.models import Condition

logger = logging.getLogger(__name__)
Status = JudgeRating.Status
CUSTOM_ID_PREFIX = "judge-rating-"


def judge_batch_submit(
    *, judge: Judge, conditions: list[Condition] | None = None, started_by: str = ""
) -> JudgeBatch | None:
    """Create the missing rating rows (as `judge_start`, without dispatching) and submit every pending one as one
    batch. None when nothing is pending. JudgeSetupError, naming it, when the provider's wire format has no
    Batch API, the judge cannot run, or the upload is refused (the ratings are given back)."""
    if batch_api_of(judge.provider) is None:
        raise JudgeSetupError(
            f"Judge {judge.name}: provider {judge.provider.name} is {judge.provider.get_kind_display()}, whose "
            "wire format has no Batch API here. Run the judge without --batch."
        )
    problems = judge_problems(judge=judge)
    if problems:
        raise JudgeSetupError(" ".join(problems))
    judge_start(judge=judge, conditions=conditions, dispatch=False)
    batch = _claim(judge, conditions, started_by=started_by)
    if batch is not None:
        _send(batch)
    return batch


def _claim(judge: Judge, conditions, *, started_by: str) -> JudgeBatch | None:
    pending = JudgeRating.objects.filter(judge=judge, status=Status.PENDING)
    if conditions is not None:
        pending = pending.filter(response__condition__in=conditions)
    return batch_rows_claim(
        pending, JudgeBatch, total_field="ratings_total", judge=judge, started_by=started_by
    )


def _held(batch: JudgeBatch):
    return batch_rows_held(JudgeRating, batch)


def _send(batch: JudgeBatch) -> None:
    judge = batch.judge
    provider = judge.provider
    held = _held(batch).select_related("response__prompt__emotion").prefetch_related("versus").order_by("id")
    requests = [
        (
            f"{CUSTOM_ID_PREFIX}{rating.id}",
            judge_request(
                judge=judge, response=rating.response, versus=rating.versus, sample_index=rating.sample_index
            ),
        )
        for rating in held.iterator(chunk_size=2000)
    ]
    try:
        batch_record_submit(
            batch,
            provider=provider,
            requests=requests,
            metadata={"platform_judge_batch": str(batch.pk), "judge": judge.name},
        )
    except ProviderError as exc:  # refused, unreachable, key missing: nothing was submitted
        _release(batch, error=f"submitting the batch failed: {exc}")
        raise JudgeSetupError(f"Judge {judge.name}: submitting the batch failed: {exc}") from None
    logger.info("judge batch submitted", extra={"judge": judge.name, "ratings": len(requests)})


def _give_back(batch: JudgeBatch, *, error: str = "", undo_attempt: bool = False) -> list[int]:
    ids = list(_held(batch).values_list("id", flat=True))
    changes = dict(status=Status.PENDING, claim_token="", claimed_at=None, next_attempt_at=None)
    if undo_attempt:
        changes["attempts"] = F("attempts") - 1
    if error:
        changes["last_error"] = error
    _held(batch).update(**changes)
    return ids


def _release(batch: JudgeBatch, *, error: str) -> None:
    with transaction.atomic():
        ids = _give_back(batch, error=error, undo_attempt=True)
        JudgeBatch.objects.filter(pk=batch.pk).update(
            status=JudgeBatch.Status.FAILED,
            error=error,
            ratings_returned=len(ids),
            completed_at=timezone.now(),
        )


def judge_batch_poll(*, batch: JudgeBatch) -> JudgeBatch:
    """Ask the provider how a submitted batch is doing; when it has ended, collect it (module doc). A batch not
    submitted (collected already, failed) is returned as it is."""
    if batch.status != JudgeBatch.Status.SUBMITTED:
        return batch
    provider = batch.judge.provider
    api, api_key = batch_api_of(provider), provider_api_key(provider)
    state = api.batch_state(provider=provider, api_key=api_key, batch_id=batch.provider_batch_id)
    if not state.ended:
        JudgeBatch.objects.filter(pk=batch.pk).update(provider_status=state.status)
        batch.refresh_from_db()
        return batch
    lines = api.batch_results(provider=provider, api_key=api_key, state=state)
    with transaction.atomic():
        locked = (
            JudgeBatch.objects.select_for_update()
            .select_related("judge__provider", "judge__study")
            .get(pk=batch.pk)
        )
        if locked.status != JudgeBatch.Status.SUBMITTED:
            return locked  # another poller collected it meanwhile
        collected = _collect(locked, lines, price_factor=api.price_factor)
        returned = [*collected.retried, *_give_back(locked)]
        batch_ended_record(locked, state, collected)
        locked.ratings_stored = collected.stored
        locked.ratings_failed = collected.failed
        locked.ratings_returned = len(returned)
        locked.completed_at = timezone.now()
        locked.save()
        if returned:
            transaction.on_commit(lambda: judge_dispatch(rating_ids=returned))
    return locked


def _collect(batch: JudgeBatch, lines, *, price_factor: Decimal) -> BatchCollected:
    """Store, fail or give back each answered rating the batch holds (inside the caller's transaction)."""
    judge = batch.judge
    provider = judge.provider
    api = batch_api_of(provider)
    ratings = {
        rating.id: rating
        for rating in _held(batch)
        .select_related("response__prompt__emotion")
        .prefetch_related("versus")  # a second query, by id: a join on the responses again costs far more
        .order_by()
        .iterator(chunk_size=2000)
    }
    turnaround_ms = int((timezone.now() - (batch.submitted_at or timezone.now())).total_seconds() * 1000)
    result = BatchCollected()
    for line, rating in result.lines_matched(lines, ratings, prefix=CUSTOM_ID_PREFIX):
        rating.judge = judge
        try:
            completion = line_completion(
                api=api,
                provider=provider,
                line=line,
                request=judge_request(
                    judge=judge,
                    response=rating.response,
                    versus=rating.versus,
                    sample_index=rating.sample_index,
                ),
                batch=batch,
                latency_ms=turnaround_ms,
                price_factor=price_factor,
            )
        except ProviderError as exc:  # refused, empty, filtered, malformed: settled as for a synchronous call
            held = JudgeRating.objects.filter(
                id=rating.id, claim_token=batch.claim_token, status=Status.RUNNING
            )
            outcome = held_settle(
                held, error=exc, attempt=rating.attempts, max_attempts=provider.max_attempts
            )
            result.attempt_settled(rating.id, outcome)
            continue
        outcome = judge_reply_store(
            rating=rating, token=batch.claim_token, completion=completion, batch_id=batch.provider_batch_id
        )
        result.cost += completion.cost
        if outcome.status == "done":
            result.stored += 1
        elif outcome.status == "retry":
            result.retried.append(rating.id)
        else:
            result.failed += outcome.status == "failed"
    return result


def judge_batches_poll_open() -> int:
    """Poll every submitted judge batch (beat runs this every minute); returns how many ended now."""
    submitted = JudgeBatch.objects.filter(status=JudgeBatch.Status.SUBMITTED).select_related(
        "judge__provider"
    )
    return batches_poll_each(submitted, judge_batch_poll)
