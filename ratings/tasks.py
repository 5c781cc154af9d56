"""Periodic work of the participant flow (scheduled by CELERY_BEAT_SCHEDULE in config/settings.py)."""

from celery import shared_task

from studies.participants import participants_release_stale


@shared_task(acks_late=True, time_limit=120, soft_time_limit=100)
def release_stale_participants() -> int:
    """Times out active participants silent past their study's time limit and gives their slot and unanswered
    items back. Idempotent: the database says who is stale, so a repeated or overlapping run does no harm."""
    return participants_release_stale()
