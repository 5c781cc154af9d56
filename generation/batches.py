"""OpenAI's Batch API: a condition's pending items in one upload, answered within 24 hours at half the price.

    python manage.py generate_responses <study-slug> --batch        # submit every pending item, per condition
    python manage.py generate_responses <study-slug> --batch-poll   # collect finished batches now

Celery beat collects finished batches every minute (`generation_batches_poll_task`); the admin's generation
page submits and collects too. Where it fits: OpenAI-kind providers whose endpoint offers `/v1/files` and
`/v1/batches` (OpenAI itself and some compatible hosts), for a large run that can wait up to a day. Anthropic's
providers and servers without the Batch API use ordinary generation.

Exactly once, as for ordinary generation: submitting claims the condition's pending items for the batch (a
conditional UPDATE: status running, the batch's claim token, held until the 24-hour window has passed), so no
worker calls them one by one meanwhile. Collecting stores each answered item through the same path as a
worker (`services._store`: response, provenance with the exact request and raw body, cost at the batch
price), fails items the provider refused (4xx) with the reason, and gives everything else back to ordinary
generation (transient errors, lines missing from the output, a failed or expired batch). A batch is
collected once: under a lock on its row, and only while it is submitted. No provider call is made inside a
database transaction: the upload and the downloads happen before the rows are written.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from generation.models import GenerationAttempt, GenerationBatch, GenerationItem, Provider
from generation.providers import (
    PermanentProviderError,
    ProviderError,
    TransientProviderError,
    _client,
    _parse_openai,
    completion_checked,
    provider_api_key,
    provider_request_build,
)
from generation.services import (
    GenerationSetupError,
    _record_attempt,
    _store,
    config_params,
    config_render,
    generation_dispatch,
    generation_start,
)
from studies.models import Condition, Study

logger = logging.getLogger(__name__)

Status = GenerationItem.Status
BATCH_PRICE_FACTOR = Decimal("0.5")  # OpenAI bills Batch API tokens at half the synchronous price
COMPLETION_WINDOW = "24h"
HOLD = timedelta(hours=25)  # the provider's window plus an hour to finalise
ENDPOINT = "/v1/chat/completions"
OPEN_STATES = {"validating", "in_progress", "finalizing", "cancelling"}


@dataclass
class BatchCollected:
    stored: int = 0
    failed: int = 0
    returned: int = 0
    unreadable_lines: int = 0
    cost: Decimal = Decimal(0)


def batch_submit(
    *, study: Study, conditions: list[Condition], started_by: str = "", via: str = "command"
) -> list[GenerationBatch]:
    """Creates the conditions' missing items (as `generation_start` does, without dispatching them) and submits
    each condition's pending items as one batch. Raises GenerationSetupError, naming it, for a condition whose
    provider cannot take batches, and when the upload or the batch is refused (its items are given back)."""
    for condition in conditions:
        provider = condition.llm_config.provider
        if provider.kind != Provider.Kind.OPENAI:
            raise GenerationSetupError(
                f"{condition.name}: provider {provider.name} is {provider.get_kind_display()}; the Batch API "
                "is only used with OpenAI-kind providers. Use ordinary generation for it."
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
    now = timezone.now()
    with transaction.atomic():
        batch = GenerationBatch.objects.create(condition=condition, started_by=started_by)
        claimed = GenerationItem.objects.filter(condition=condition, status=Status.PENDING).update(
            status=Status.RUNNING,
            claim_token=batch.claim_token,
            claimed_at=now + HOLD,
            batch=batch,
            attempts=F("attempts") + 1,
            updated_at=now,
        )
        if not claimed:
            batch.delete()
            return None
        batch.items_total = claimed
        batch.save(update_fields=["items_total"])
    return batch


def _held(batch: GenerationBatch):
    return GenerationItem.objects.filter(batch=batch, claim_token=batch.claim_token, status=Status.RUNNING)


def _request_body(config, item: GenerationItem) -> dict:
    system, messages = config_render(config=config, prompt=item.prompt)
    return provider_request_build(
        kind=config.provider.kind,
        model=config.model,
        system=system,
        messages=messages,
        params=config_params(config),
    )


def _batch_send(batch: GenerationBatch) -> None:
    config = batch.condition.llm_config
    provider = config.provider
    items = list(_held(batch).select_related("prompt__emotion"))
    lines = [
        json.dumps(
            {
                "custom_id": f"item-{item.id}",
                "method": "POST",
                "url": ENDPOINT,
                "body": _request_body(config, item),
            }
        )
        for item in items
    ]
    try:
        client = _client(provider, provider_api_key(provider))
        uploaded = client.files.create(file=("requests.jsonl", "\n".join(lines).encode()), purpose="batch")
        created = client.batches.create(
            input_file_id=uploaded.id,
            endpoint=ENDPOINT,
            completion_window=COMPLETION_WINDOW,
            metadata={"platform_batch": str(batch.pk), "condition": batch.condition.name},
        )
    except Exception as exc:  # the SDK's API and connection errors, a missing key: nothing was submitted
        reason = exc.reason if isinstance(exc, PermanentProviderError) else f"{type(exc).__name__}: {exc}"
        _batch_release(batch, error=f"submitting the batch failed: {reason}")
        raise GenerationSetupError(f"{batch.condition.name}: submitting the batch failed: {reason}") from None
    GenerationBatch.objects.filter(pk=batch.pk).update(
        status=GenerationBatch.Status.SUBMITTED,
        provider_batch_id=created.id,
        provider_status=created.status or "",
        input_file_id=uploaded.id,
        submitted_at=timezone.now(),
    )
    batch.refresh_from_db()
    logger.info(
        "batch submitted", extra={"condition": batch.condition.name, "items": len(items), "batch": created.id}
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
    client = _client(provider, provider_api_key(provider))
    remote = client.batches.retrieve(batch.provider_batch_id)
    now = timezone.now()
    if remote.status in OPEN_STATES:
        GenerationBatch.objects.filter(pk=batch.pk).update(provider_status=remote.status, checked_at=now)
        batch.refresh_from_db()
        return batch
    texts = [
        client.files.content(file_id).text
        for file_id in (remote.output_file_id, remote.error_file_id)
        if file_id
    ]
    returned: list[int] = []
    with transaction.atomic():
        locked = GenerationBatch.objects.select_for_update().get(pk=batch.pk)
        if locked.status != GenerationBatch.Status.SUBMITTED:
            return locked  # another poller collected it meanwhile
        collected = _collect(locked, "\n".join(texts))
        returned = list(_held(locked).values_list("id", flat=True))
        _held(locked).update(
            status=Status.PENDING, claim_token="", claimed_at=None, next_attempt_at=None, updated_at=now
        )
        errors = getattr(getattr(remote, "errors", None), "data", None) or []
        locked.status = (
            GenerationBatch.Status.COMPLETED
            if remote.status == "completed"
            else GenerationBatch.Status.FAILED
        )
        locked.provider_status = remote.status
        locked.output_file_id = remote.output_file_id or ""
        locked.error_file_id = remote.error_file_id or ""
        locked.items_stored = collected.stored
        locked.items_failed = collected.failed
        locked.items_returned = len(returned)
        locked.cost = collected.cost
        locked.error = "; ".join(
            [f"the batch ended {remote.status}"] * (remote.status != "completed")
            + [f"{getattr(e, 'code', '')}: {getattr(e, 'message', e)}" for e in errors]
            + [f"{collected.unreadable_lines} unreadable output lines"] * bool(collected.unreadable_lines)
        )
        locked.checked_at = locked.completed_at = now
        locked.save()
        if returned:
            transaction.on_commit(lambda: generation_dispatch(item_ids=returned))
    return locked


def _collect(batch: GenerationBatch, text: str) -> BatchCollected:
    config = batch.condition.llm_config
    provider = config.provider
    items = {
        item.id: item
        for item in _held(batch).select_related("prompt__emotion", "condition__llm_config__provider")
    }
    turnaround_ms = (
        int((timezone.now() - batch.submitted_at).total_seconds() * 1000) if batch.submitted_at else 0
    )
    result = BatchCollected()
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            item_id = int(str(record["custom_id"]).removeprefix("item-"))
        except (ValueError, KeyError, TypeError):
            result.unreadable_lines += 1
            continue
        item = items.pop(item_id, None)
        if item is None:
            continue  # not ours, or seen already
        response = record.get("response") or {}
        status_code = response.get("status_code")
        body = response.get("body")
        if status_code == 200 and isinstance(body, dict):
            try:
                try:
                    parsed = _parse_openai(body)
                except (KeyError, IndexError, TypeError, AttributeError) as exc:
                    raise TransientProviderError(
                        "malformed", f"malformed body ({exc})", http_status=200
                    ) from None
                completion = completion_checked(
                    provider=provider,
                    parsed=parsed,
                    request={**_request_body(config, item), "_batch": batch.provider_batch_id},
                    raw_response=body,
                    latency_ms=turnaround_ms,
                    http_status=200,
                )
            except (
                ProviderError
            ) as exc:  # empty text, filtered or refused, malformed: as for a synchronous call
                reason = str(exc)
                permanent = isinstance(exc, PermanentProviderError)
            else:
                completion = dataclasses.replace(completion, cost=completion.cost * BATCH_PRICE_FACTOR)
                outcome = _store(
                    item=item,
                    token=batch.claim_token,
                    completion=completion,
                    config=config,
                    started=batch.submitted_at,
                )
                result.stored += outcome.status == "done"
                result.cost += completion.cost
                continue
        else:
            error = record.get("error") or (body.get("error") if isinstance(body, dict) else None)
            message = error.get("message", "") if isinstance(error, dict) else str(error or "")
            reason = f"HTTP {status_code}: {message}"
            permanent = (
                isinstance(status_code, int)
                and 400 <= status_code < 500
                and status_code not in {408, 409, 429}
            )
        outcome = GenerationAttempt.Outcome.PERMANENT if permanent else GenerationAttempt.Outcome.TRANSIENT
        error = _BatchLineError(reason, http_status=status_code if isinstance(status_code, int) else None)
        _record_attempt(item.id, item.attempts, outcome, batch.submitted_at or timezone.now(), error=error)
        if permanent:
            GenerationItem.objects.filter(
                id=item.id, claim_token=batch.claim_token, status=Status.RUNNING
            ).update(status=Status.FAILED, error_kind="batch", last_error=f"batch: {reason}", claim_token="")
            result.failed += 1
        else:
            GenerationItem.objects.filter(id=item.id).update(
                last_error=f"batch: {reason}", error_kind="batch"
            )
    return result


class _BatchLineError(Exception):
    """What `_record_attempt` records for a line the batch answered with an error."""

    kind = "batch"

    def __init__(self, message: str, *, http_status: int | None):
        super().__init__(message)
        self.http_status = http_status


def batches_poll_open() -> int:
    """Polls every submitted batch (beat runs this every minute); returns how many ended now."""
    ended = 0
    for batch in GenerationBatch.objects.filter(status=GenerationBatch.Status.SUBMITTED).select_related(
        "condition__llm_config__provider"
    ):
        try:
            ended += batch_poll(batch=batch).status != GenerationBatch.Status.SUBMITTED
        except Exception:  # one provider down must not stop the others; the next poll tries again
            logger.exception("polling a batch failed", extra={"batch": batch.provider_batch_id})
    return ended
