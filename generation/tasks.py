"""Celery tasks: thin doors into generation.services. They take ids and are idempotent (the item's status in the
database says whether the work is done; claiming is a conditional UPDATE).

Time limits stay well below the broker's visibility timeout (settings.CELERY_BROKER_TRANSPORT_OPTIONS) and below
GENERATION_LEASE_SECONDS, so a live task is never taken over or redelivered while it still runs."""

import time

from celery import shared_task
from django.conf import settings

from generation.questionnaire import questionnaire_slot_task_run
from generation.services import generation_item_run, generation_sweep


@shared_task(bind=True, acks_late=True, ignore_result=True, soft_time_limit=210, time_limit=240)
def generate_item(self, item_id: int) -> str:
    """Generate one (prompt, condition, sample). A transient failure re-queues the item with its backoff."""
    while True:
        outcome = generation_item_run(item_id=item_id)
        if outcome.status != "retry":
            return outcome.status
        if self.request.is_eager:
            time.sleep(outcome.countdown)
            continue
        # A fresh message rather than self.retry(): the attempt count lives in the database, not the message.
        generate_item.apply_async((item_id,), countdown=outcome.countdown, queue=settings.GENERATION_QUEUE)
        return "retry"


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=50, time_limit=60)
def generation_sweep_task() -> int:
    """Re-dispatch items whose worker died mid-call (run by beat)."""
    return generation_sweep()


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=540, time_limit=600)
def questionnaire_slot_task(
    condition_id: int, phase: str, situation_id: int | None, run_index: int, max_asks: int
) -> str:
    """One EmotionBench run slot of an LLM subject: ask until a reply parses, store the run once (its unique
    constraint makes a redelivered or duplicated message harmless)."""
    outcome = questionnaire_slot_task_run(condition_id, phase, situation_id, run_index, max_asks)
    return outcome or "stored"


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=100, time_limit=120)
def generation_batches_poll_task() -> int:
    """Collect finished Batch API batches (run by beat)."""
    from generation.batches import batches_poll_open

    return batches_poll_open()
