"""Thin Celery tasks: they take ids, re-fetch rows and call a service. Each is idempotent (the database
says what is done), so a redelivered task repeats nothing."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db.models import Q

from .bonuses import OPEN_STATES, bonuses_pay
from .client import ProlificError
from .launch import prolific_places_sync
from .models import ProlificStudy, WebhookEvent
from .submissions import submissions_reconcile
from .webhooks import webhook_event_process

log = logging.getLogger(__name__)

RETRY = {"autoretry_for": (ProlificError,), "retry_backoff": 5, "retry_backoff_max": 300, "max_retries": 8}


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90, **RETRY)
def process_webhook_event(event_id: int) -> str | None:
    return webhook_event_process(event_id=event_id)


@shared_task(acks_late=True, soft_time_limit=240, time_limit=300)
def prolific_reconcile_all() -> dict:
    """The beat job: every linked study on Prolific is read through (all pages) and repaired; events whose
    task was lost (a worker died before processing) are processed; places follow the quotas; bonuses left
    mid-payment are reconciled."""
    done = {}
    for event_id in WebhookEvent.objects.filter(processed_at__isnull=True).values_list("pk", flat=True)[:500]:
        webhook_event_process(event_id=event_id)
    live = (
        ProlificStudy.objects.exclude(prolific_study_id="")
        .exclude(Q(state=ProlificStudy.State.COMPLETED) & Q(bonus_batches__isnull=True))
        .distinct()
    )
    for link in live.select_related("study"):
        try:
            if link.state in (ProlificStudy.State.ACTIVE, ProlificStudy.State.PAUSED):
                prolific_places_sync(link=link)  # quotas changed since publishing: places follow
            report = submissions_reconcile(link=link)
            if link.bonus_batches.filter(state__in=OPEN_STATES).exists():
                bonuses_pay(link=link)
        except ProlificError as exc:  # one study's failure must not stop the others; the next beat retries
            log.warning("prolific: reconciliation of %s failed: %s", link.study.slug, exc)
            continue
        done[link.study.slug] = {"seen": report.seen, "changed": report.changed, "freed": report.freed}
    return done


@shared_task(acks_late=True, soft_time_limit=240, time_limit=300, **RETRY)
def pay_bonuses(link_id: int) -> dict:
    report = bonuses_pay(link=ProlificStudy.objects.select_related("study").get(pk=link_id))
    return report.__dict__
