"""Celery tasks of the pairwise kind: thin doors into its views' computing ahead."""

from celery import shared_task

from .views import pairwise_pages_refresh


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=110, time_limit=120)
def pairwise_pages_refresh_task() -> int:
    """Run by beat: the pairwise analysts' pages' files computed ahead for studies whose answers changed."""
    return pairwise_pages_refresh()
