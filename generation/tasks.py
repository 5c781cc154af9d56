"""Celery tasks: thin doors into generation's services. They take ids and are idempotent (the item's status in the
database says whether the work is done; claiming is a conditional UPDATE).

This module sits on top: it imports the services, and nothing in generation imports it. Services send work here
by task name (services.dispatch.GENERATE_ITEM, questionnaire.QUESTIONNAIRE_SLOT_TASK); the names below are
pinned so they match even if this module moves.

Time limits stay well below the broker's visibility timeout (settings.CELERY_BROKER_TRANSPORT_OPTIONS) and below
GENERATION_LEASE_SECONDS, so a live task is never taken over or redelivered while it still runs."""

import time

from celery import shared_task
from django.conf import settings

from generation.batches import batches_poll_open
from generation.judge_batches import judge_batches_poll_open
from generation.questionnaire import QUESTIONNAIRE_SLOT_TASK, questionnaire_slot_task_run
from generation.services.dispatch import GENERATE_ITEM, generation_sweep
from generation.services.judging import JUDGE_RATING_TASK, judge_rating_run, judge_sweep
from generation.services.running import generation_item_run, run_until_settled


@shared_task(
    bind=True, name=GENERATE_ITEM, acks_late=True, ignore_result=True, soft_time_limit=210, time_limit=240
)
def generate_item(self, item_id: int) -> str:
    """Generate one (prompt, condition, sample). A transient failure re-queues the item with its backoff."""

    def wait(countdown: float) -> bool:
        if self.request.is_eager:
            time.sleep(countdown)
            return True
        # A fresh message rather than self.retry(): the attempt count lives in the database, not the message.
        generate_item.apply_async((item_id,), countdown=countdown, queue=settings.GENERATION_QUEUE)
        return False

    return run_until_settled(lambda: generation_item_run(item_id=item_id), wait=wait).status


def _requeue_or_sleep(task, args):
    """The wait between tries: sleep when eager, else a fresh message after `countdown` (the attempt count lives
    in the database, not the message)."""

    def wait(countdown: float) -> bool:
        if task.request.is_eager:
            time.sleep(countdown)
            return True
        task.apply_async(args, countdown=countdown, queue=settings.GENERATION_QUEUE)
        return False

    return wait


@shared_task(
    bind=True, name=JUDGE_RATING_TASK, acks_late=True, ignore_result=True, soft_time_limit=210, time_limit=240
)
def judge_rating(self, rating_id: int) -> str:
    """One judge rating of one (response, sample). A transient failure re-queues it with its backoff."""
    wait = _requeue_or_sleep(self, (rating_id,))
    return run_until_settled(lambda: judge_rating_run(rating_id=rating_id), wait=wait).status


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=100, time_limit=120)
def judge_batches_poll_task() -> int:
    """Collect finished judge batches (run by beat)."""
    return judge_batches_poll_open()


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=50, time_limit=60)
def generation_sweep_task() -> int:
    """Re-dispatch items and judge ratings whose worker died mid-call (run by beat)."""
    return generation_sweep() + judge_sweep()


@shared_task(
    name=QUESTIONNAIRE_SLOT_TASK, acks_late=True, ignore_result=True, soft_time_limit=540, time_limit=600
)
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
    return batches_poll_open()
