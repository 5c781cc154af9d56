"""OpenAI's Batch API: a condition's pending items in one upload, answered within 24 hours at half the price.

    python manage.py generate_responses <study-slug> --batch        # submit every pending item, per condition
    python manage.py generate_responses <study-slug> --batch-poll   # collect finished batches now

Celery beat collects finished batches every minute (`generation_batches_poll_task`); the admin's generation
page submits and collects too. Where it fits: providers whose adapter has the Batch API capability
(generation.providers.base.BatchAPI; today the OpenAI-compatible adapter, for endpoints that offer `/v1/files`
and `/v1/batches`), for a large run that can wait up to a day. Other providers use ordinary generation. This
module speaks no wire format: building lines, uploading, polling and reading result lines are the adapter's.

Exactly once, as for ordinary generation: submitting claims the condition's pending items for the batch (a
conditional UPDATE: status running, the batch's claim token, held until the 24-hour window has passed), so no
worker calls them one by one meanwhile. Collecting stores each answered item through the same path as a
worker (`running.response_store`: response, provenance with the exact request and raw body, cost at the batch
price), settles a line's error by the one retry policy (`running.item_attempt_failed`: a refusal fails the item
with the reason, a transient error sends it back to ordinary generation), and gives everything else back too
(lines missing from the output, a failed or expired batch). A batch is
collected once: under a lock on its row, and only while it is submitted. No provider call is made inside a
database transaction: the upload and the downloads happen before the rows are written.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from generation.models import GenerationBatch, GenerationItem
from generation.providers import ProviderError, batch_api_of, provider_api_key
from generation.providers.base import BatchAPI, completion_checked
from generation.services.dispatch import generation_dispatch, generation_start
from generation.services.prompts import GenerationSetupError, config_request
from generation.services.running import item_attempt_failed, model_has_field, response_store
from studies.models import Condition, Study

logger = logging.getLogger(__name__)

Status = GenerationItem.Status
ITEM_PREFIX = "item-"  # an item's custom id in the batch: the prefix and its id
HOLD = timedelta(hours=25)  # the provider's window (a day) plus an hour to finalise


@dataclass
class BatchCollected:
    stored: int = 0
    failed: int = 0
    unreadable_lines: int = 0
    cost: Decimal = Decimal(0)
    retried: list[int] = dataclasses.field(default_factory=list)

    def lines_matched(self, lines, rows: dict, *, prefix: str):
        """Each output line with the held row it answers (`rows` by id, each taken once). A line whose custom id
        is not `prefix` and a number counts as unreadable; a line of no held row (not ours, or seen already) is
        passed over."""
        for line in lines:
            try:
                row_id = int(line.custom_id.removeprefix(prefix))
            except ValueError:
                self.unreadable_lines += 1
                continue
            row = rows.pop(row_id, None)
            if row is not None:
                yield line, row

    def attempt_settled(self, row_id: int, outcome) -> None:
        """A row whose answer was refused, empty or unreadable, settled as for a synchronous call: failed for good,
        or given back to be tried again."""
        if outcome.status == "failed":
            self.failed += 1
        else:
            self.retried.append(row_id)


def batch_record_submit(batch, *, provider, requests: list[tuple[str, dict]], metadata: dict):
    """Upload (custom id, request body) pairs as one batch and record the provider's ids on `batch` (any
    BatchRecord: submitted, with its batch and input file ids). Raises the classified ProviderError when nothing
    was submitted (refused, unreachable, key missing or not allowed); the caller gives its rows back."""
    submitted = batch_api_of(provider).batch_submit(
        provider=provider, api_key=provider_api_key(provider), requests=requests, metadata=metadata
    )
    type(batch).objects.filter(pk=batch.pk).update(
        status=batch.Status.SUBMITTED,
        provider_batch_id=submitted.batch_id,
        provider_status=submitted.status,
        input_file_id=submitted.input_file_id,
        submitted_at=timezone.now(),
    )
    batch.refresh_from_db()
    return submitted


def line_completion(
    *, api: BatchAPI, provider, line, request: dict, batch, latency_ms: int, price_factor: Decimal
):
    """The Completion of one answered batch line of `batch`, at the batch price, its request recorded with the
    provider's batch id (`_batch`); the line's classified error, or a malformed, empty or refused body's, is
    raised as for a synchronous call. Shared by every kind of batch."""
    if line.error is not None:
        raise line.error
    data, reply = api.body_read(line.body, http_status=200)
    completion = completion_checked(
        provider=provider,
        reply=reply,
        request={**request, "_batch": batch.provider_batch_id},
        raw_response=data,
        latency_ms=latency_ms,
        http_status=200,
    )
    return dataclasses.replace(completion, cost=completion.cost * price_factor)


def batch_ended_record(batch, state, collected: BatchCollected) -> None:
    """What an ended batch records, a generation batch or a judge batch alike (the caller adds its own counts and
    saves): completed or failed, the provider's status and files, the cost, and what went wrong in words (empty
    when nothing did)."""
    batch.status = batch.Status.COMPLETED if state.completed else batch.Status.FAILED
    batch.provider_status = state.status
    batch.output_file_id = state.output_file_id
    batch.error_file_id = state.error_file_id
    batch.cost = collected.cost
    batch.error = "; ".join(
        [f"the batch ended {state.status}"] * (not state.completed)
        + state.errors
        + [f"{collected.unreadable_lines} unreadable output lines"] * bool(collected.unreadable_lines)
    )


def batch_submit(
    *, study: Study, conditions: list[Condition], started_by: str = "", via: str = "command"
) -> list[GenerationBatch]:
    """Creates the conditions' missing items (as `generation_start` does, without dispatching them) and submits
    each condition's pending items as one batch. Raises GenerationSetupError, naming it, for a condition whose
    provider's adapter has no Batch API, and when the upload or the batch is refused (its items are given back)."""
    for condition in conditions:
        provider = condition.llm_config.provider
        if batch_api_of(provider) is None:
            raise GenerationSetupError(
                f"{condition.name}: provider {provider.name} is {provider.get_kind_display()}, whose wire format "
                "has no Batch API here. Use ordinary generation for it."
            )
    generation_start(study=study, conditions=conditions, started_by=started_by, via=via, dispatch=False)
    batches = []
    for condition in conditions:
        batch = _batch_claim(condition, started_by=started_by)
        if batch is not None:
            _batch_send(batch)
            batches.append(batch)
    return batches


def _batch_claim(condition: Condition, *, started_by: str) -> GenerationBatch | None:
    pending = GenerationItem.objects.filter(condition=condition, status=Status.PENDING)
    return batch_rows_claim(
        pending, GenerationBatch, total_field="items_total", condition=condition, started_by=started_by
    )


def batch_rows_claim(pending, batch_model, *, total_field: str, **create):
    """Create a batch (any BatchRecord, with `create`'s fields) and claim the `pending` work rows for it in one
    transaction: running, held by the batch's token for the provider's window, one more attempt. Records the
    count in `total_field`; None (and no batch) when nothing was pending. Shared by generation items and judge
    ratings, whose bookkeeping is the same."""
    now = timezone.now()
    stamp = {"updated_at": now} if model_has_field(pending.model, "updated_at") else {}
    with transaction.atomic():
        batch = batch_model.objects.create(**create)
        claimed = pending.filter(status=Status.PENDING).update(
            status=Status.RUNNING,
            claim_token=batch.claim_token,
            claimed_at=now + HOLD,
            batch=batch,
            attempts=F("attempts") + 1,
            **stamp,
        )
        if not claimed:
            batch.delete()
            return None
        setattr(batch, total_field, claimed)
        batch.save(update_fields=[total_field])
    return batch


def batch_rows_held(model, batch):
    """The rows of `model` the batch still holds (running under its claim token)."""
    return model.objects.filter(batch=batch, claim_token=batch.claim_token, status=Status.RUNNING)


def _held(batch: GenerationBatch):
    return batch_rows_held(GenerationItem, batch)


def _batch_send(batch: GenerationBatch) -> None:
    config = batch.condition.llm_config
    provider = config.provider
    items = list(_held(batch).select_related("prompt__emotion"))
    requests = [
        (f"{ITEM_PREFIX}{item.id}", config_request(config=config, prompt=item.prompt)) for item in items
    ]
    try:
        submitted = batch_record_submit(
            batch,
            provider=provider,
            requests=requests,
            metadata={"platform_batch": str(batch.pk), "condition": batch.condition.name},
        )
    except ProviderError as exc:  # refused, unreachable, key missing or not allowed: nothing was submitted
        _batch_release(batch, error=f"submitting the batch failed: {exc}")
        raise GenerationSetupError(f"{batch.condition.name}: submitting the batch failed: {exc}") from None
    logger.info(
        "batch submitted",
        extra={"condition": batch.condition.name, "items": len(items), "batch": submitted.batch_id},
    )


def _batch_release(batch: GenerationBatch, *, error: str) -> list[int]:
    """Gives the items the batch still holds back to ordinary generation and marks the batch failed."""
    with transaction.atomic():
        ids = list(_held(batch).values_list("id", flat=True))
        _held(batch).update(
            status=Status.PENDING,
            claim_token="",
            claimed_at=None,
            next_attempt_at=None,
            attempts=F("attempts") - 1,
            last_error=error,
            updated_at=timezone.now(),
        )
        GenerationBatch.objects.filter(pk=batch.pk).update(
            status=GenerationBatch.Status.FAILED,
            error=error,
            items_returned=len(ids),
            completed_at=timezone.now(),
        )
    return ids


def batch_poll(*, batch: GenerationBatch) -> GenerationBatch:
    """Asks the provider how a submitted batch is doing; when it has ended, collects it (see the module doc).
    A batch that is not submitted (collected already, failed) is returned as it is."""
    if batch.status != GenerationBatch.Status.SUBMITTED:
        return batch
    provider = batch.condition.llm_config.provider
    api, api_key = batch_api_of(provider), provider_api_key(provider)
    state = api.batch_state(provider=provider, api_key=api_key, batch_id=batch.provider_batch_id)
    now = timezone.now()
    if not state.ended:
        GenerationBatch.objects.filter(pk=batch.pk).update(provider_status=state.status, checked_at=now)
        batch.refresh_from_db()
        return batch
    lines = api.batch_results(provider=provider, api_key=api_key, state=state)
    with transaction.atomic():
        locked = GenerationBatch.objects.select_for_update().get(pk=batch.pk)
        if locked.status != GenerationBatch.Status.SUBMITTED:
            return locked  # another poller collected it meanwhile
        collected = _collect(locked, lines, price_factor=api.price_factor)
        returned = [*collected.retried, *_held(locked).values_list("id", flat=True)]
        _held(locked).update(
            status=Status.PENDING, claim_token="", claimed_at=None, next_attempt_at=None, updated_at=now
        )
        batch_ended_record(locked, state, collected)
        locked.items_stored = collected.stored
        locked.items_failed = collected.failed
        locked.items_returned = len(returned)
        locked.checked_at = locked.completed_at = now
        locked.save()
        if returned:
            transaction.on_commit(lambda: generation_dispatch(item_ids=returned))
    return locked


def _collect(batch: GenerationBatch, lines, *, price_factor: Decimal) -> BatchCollected:
    """Store, fail or send back each answered item the batch holds (inside the caller's transaction)."""
    config = batch.condition.llm_config
    provider = config.provider
    api = batch_api_of(provider)
    items = {
        item.id: item
        for item in _held(batch).select_related("prompt__emotion", "condition__llm_config__provider")
    }
    started = batch.submitted_at or timezone.now()
    turnaround_ms = int((timezone.now() - started).total_seconds() * 1000)
    result = BatchCollected()
    for line, item in result.lines_matched(lines, items, prefix=ITEM_PREFIX):
        try:
            completion = line_completion(
                api=api,
                provider=provider,
                line=line,
                request=config_request(config=config, prompt=item.prompt),
                batch=batch,
                latency_ms=turnaround_ms,
                price_factor=price_factor,
            )
        except ProviderError as exc:  # refused, empty, filtered, malformed: settled as for a synchronous call
            outcome = item_attempt_failed(
                item=item,
                token=batch.claim_token,
                error=exc,
                max_attempts=provider.max_attempts,
                started=started,
            )
            result.attempt_settled(item.id, outcome)
            continue
        outcome = response_store(
            item=item,
            token=batch.claim_token,
            completion=completion,
            config=config,
            started=batch.submitted_at,
        )
        result.stored += outcome.status == "done"
        result.cost += completion.cost
    return result


def batches_poll_each(batches, poll) -> int:
    """`poll(batch=...)` each submitted batch (of any kind); returns how many ended now. One provider down does
    not stop the others: its batch is logged and polled again next time."""
    ended = 0
    for batch in batches:
        try:
            ended += poll(batch=batch).status != GenerationBatch.Status.SUBMITTED
        except Exception:
            logger.exception("polling a batch failed", extra={"batch": batch.provider_batch_id})
    return ended


def batches_poll_open() -> int:
    """Polls every submitted batch (beat runs this every minute); returns how many ended now."""
    submitted = GenerationBatch.objects.filter(status=GenerationBatch.Status.SUBMITTED)
    return batches_poll_each(submitted.select_related("condition__llm_config__provider"), batch_poll)
