"""Exactly once under concurrency, on the real PostgreSQL: workers processing the same webhook event,
paying the same bonuses, approving the same submissions and applying reports for the same submission at
the same instant."""

import threading
import time
from decimal import Decimal

import pytest
from django.db import connection

from recruiting.bonuses import bonuses_grant_per_rating, bonuses_pay
from recruiting.models import BonusBatch, ProlificSubmission, WebhookEvent
from recruiting.submissions import submission_status_apply, submissions_approve
from recruiting.webhooks import webhook_event_process
from studies.models import Participant
from tests.concurrency import race as race_threads

from .conftest import enroll, finish, link_build

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
WORKERS = 8


def race(target, n=WORKERS):
    return race_threads(target, n)


def test_workers_handed_the_same_event_process_it_once(requires_postgres, prolific):
    link = link_build(fake=prolific, auto_approve=True)
    participant, sub = enroll(link, "PRACE", prolific)
    finish(participant)
    event = WebhookEvent.objects.create(
        event_id="race-1",
        link=link,
        event_type="submission.status.change",
        resource_id=sub["id"],
        body={**prolific.submission_event(sub["id"]), "status": "AWAITING REVIEW"},
    )
    results, errors = race(lambda i: webhook_event_process(event_id=event.pk))
    assert not errors, errors
    assert sum(1 for r in results.values() if r is not None) == 1
    assert prolific.approvals == {"PRACE": 1}


def test_reports_of_one_submission_applied_at_once_free_the_place_once(requires_postgres, prolific):
    link = link_build(fake=prolific)
    participant, sub = enroll(link, "PFREE", prolific)
    statuses = ["RETURNED", "ACTIVE", "RETURNED", "TIMED-OUT"] * 2
    results, errors = race(
        lambda i: submission_status_apply(link=link, submission_id=sub["id"], pid="PFREE", status=statuses[i])
    )
    assert not errors, errors
    assert sum(r.freed for r in results.values()) == 1
    row = ProlificSubmission.objects.get(submission_id=sub["id"])
    assert row.status == "RETURNED"  # the highest-ranked report wins, whatever the order
    participant.refresh_from_db()
    assert participant.status in (Participant.Status.RETURNED, Participant.Status.TIMED_OUT)


def test_concurrent_bulk_approvals_approve_each_submission_once(requires_postgres, prolific):
    link = link_build(fake=prolific, quota=10, auto_approve=True)
    for i in range(12):
        participant, sub = enroll(link, f"PA{i:02d}", prolific)
        finish(participant)
        submission_status_apply(
            link=link, submission_id=sub["id"], pid=f"PA{i:02d}", status="AWAITING REVIEW"
        )
    results, errors = race(lambda i: submissions_approve(link=link).approved)
    assert not errors, errors
    assert sum(results.values()) == 12
    assert len(prolific.approvals) == 12 and set(prolific.approvals.values()) == {1}


def test_workers_paying_the_same_bonuses_at_once_pay_each_once(requires_postgres, prolific):
    link = link_build(fake=prolific)
    for i in range(5):
        participant, _ = enroll(link, f"PB{i}", prolific)
        finish(participant)
    bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.20"))
    results, errors = race(lambda i: bonuses_pay(link=link))
    assert not errors, errors
    assert sum(r.paid_bonuses for r in results.values()) == 5
    assert sum(prolific.pay_calls.values()) == 1
    assert all(n == 1 for n in prolific.bonus_paid.values()) and len(prolific.bonus_paid) == 5
    assert list(BonusBatch.objects.values_list("state", flat=True)) == ["paid"]


def test_a_worker_running_while_another_ones_pay_call_is_in_flight_does_not_pay_again(
    requires_postgres, prolific
):
    """While a pay call is on its way Prolific still reads the bulk bonus as unpaid: a second worker must
    leave the batch to the call, not reconcile it back to unpaid and pay it a second time."""
    link = link_build(fake=prolific)
    participant, _ = enroll(link, "PFLIGHT", prolific)
    finish(participant)
    bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.20"))
    prolific.pay_hangs_before_paying = 1.5

    def first_worker():
        try:
            bonuses_pay(link=link)
        finally:
            connection.close()  # the thread's own connection: left open, it outlives the test database

    first = threading.Thread(target=first_worker)
    first.start()
    deadline = time.monotonic() + 10
    while not BonusBatch.objects.filter(state=BonusBatch.State.PAYING).exists():
        assert time.monotonic() < deadline, "the first worker never claimed the pay call"
        time.sleep(0.02)
    second = bonuses_pay(link=link)  # the first worker's call is still in flight
    first.join(10)
    assert second.paid_bonuses == 0 and second.reconciled == 0
    assert sum(prolific.pay_calls.values()) == 1 and set(prolific.bonus_paid.values()) == {1}
    assert list(BonusBatch.objects.values_list("state", flat=True)) == ["paid"]


def test_webhook_deliveries_racing_store_one_event(requires_postgres, prolific, client):
    from .test_webhooks import type_signed

    link = link_build(fake=prolific)
    payload = {"resource_id": "subX", "event_type": "study.status.change", "status": "PAUSED", "metadata": {}}
    body, headers = type_signed("whsec-test-0123456789", payload, event_id="dup-race")
    from django.test import Client

    def post(i):
        return (
            Client()
            .post(
                f"/recruiting/prolific/webhook/{link.study.slug}/",
                data=body,
                content_type="application/json",
                headers=headers,
            )
            .json()["duplicate"]
        )

    results, errors = race(post)
    assert not errors, errors
    assert sorted(results.values()) == [False] + [True] * (WORKERS - 1)
    event = WebhookEvent.objects.get()
    assert event.deliveries == WORKERS
