"""Calls to Prolific whose outcome is unknown (a 5xx, which may come after the call took effect), settled
from what Prolific documents, against the loopback Prolific: approvals read back at once (and on the schedule
when the read-back fails too), every submission approved exactly once, and the admin saying what is pending
rather than "Approved 0"."""

import html
from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from recruiting.bonuses import PAYMENT_LAG, bonuses_grant_per_rating, bonuses_import_csv, bonuses_pay
from recruiting.models import BonusBatch, ProlificSubmission
from recruiting.submissions import approvals_pending, submission_status_apply, submissions_approve
from recruiting.tasks import prolific_reconcile_all

from .conftest import enroll, finish, link_build

pytestmark = pytest.mark.django_db

APPROVE = "submissions/bulk-approve/"
READ_BACK = "submissions/sub"  # GET submissions/<id>/ (the loopback's ids start with "sub")


def _awaiting_review(link, prolific, pids):
    for pid in pids:
        participant, sub = enroll(link, pid, prolific)
        finish(participant)
        prolific.set_status(sub["id"], "AWAITING REVIEW")
        submission_status_apply(link=link, submission_id=sub["id"], pid=pid, status="AWAITING REVIEW")


def _approve_from_the_admin(staff_client, link) -> str:
    response = staff_client.post(
        reverse("admin:recruiting_prolificstudy_act", args=[link.pk, "approve"]), follow=True
    )
    return html.unescape(" ".join(str(m) for m in response.context["messages"]))


def test_approvals_answered_500_are_settled_by_reading_back_each_approved_exactly_once(
    prolific, staff_client, settings
):
    """Ten runs, alternately a 500 after the approval took effect and a 500 refusing it; in half of each the
    read-back fails as well. One scheduled read-back settles what was left: every submission approved once,
    and the admin never says "Approved 0" while approvals are pending."""
    settings.PROLIFIC_MAX_ATTEMPTS = 2
    link = link_build(fake=prolific, quota=12)
    pids, pending_said = [], []
    for run in range(10):
        batch = [f"P{run}A", f"P{run}B"]
        pids += batch
        _awaiting_review(link, prolific, batch)
        if run % 2 == 0:
            prolific.fail_after_effect(APPROVE, [500])
        else:
            prolific.fail(APPROVE, [500])
        read_back_fails = run in (1, 2, 5, 6, 9)  # both kinds of 500
        if read_back_fails:
            prolific.fail(READ_BACK, [500] * settings.PROLIFIC_MAX_ATTEMPTS)
        said = _approve_from_the_admin(staff_client, link)
        pending = approvals_pending(link).count()
        assert "Approved 0" not in said
        if read_back_fails:  # this run's two wait for the schedule
            pending_said.append(said)
            assert approvals_pending(link).filter(prolific_pid__in=batch).count() == 2
            assert (
                said
                == f"{pending} approvals are waiting for Prolific to confirm; checking again in 5 minutes."
            )
        else:
            assert said.startswith("Approved 2 submission(s).")
            assert (f"{pending} approvals are waiting" in said) == bool(pending)
        prolific.faults[READ_BACK].clear()
        assert max(prolific.approvals.values()) == 1

    assert len(pending_said) == 5
    page = html.unescape(
        staff_client.get(reverse("admin:recruiting_prolificstudy_change", args=[link.pk])).content.decode()
    )
    assert "10 approvals are waiting for Prolific to confirm; checking again in 5 minutes." in page

    prolific_reconcile_all()  # one scheduled read-back

    assert prolific.approvals == {pid: 1 for pid in pids}
    assert not approvals_pending(link).exists()
    prolific_reconcile_all()
    assert prolific.approvals == {pid: 1 for pid in pids}
    assert set(ProlificSubmission.objects.values_list("status", flat=True)) == {"APPROVED"}


def test_an_approval_refused_with_a_4xx_is_released_at_once_and_never_left_pending(prolific):
    link = link_build(fake=prolific)
    _awaiting_review(link, prolific, ["PREFUSED"])
    prolific.fail(APPROVE, [400])
    with pytest.raises(Exception, match="HTTP 400"):
        submissions_approve(link=link)
    row = ProlificSubmission.objects.get()
    assert row.approval_claimed_at is None and row.approval_unknown_at is None
    assert submissions_approve(link=link).approved == 1
    assert prolific.approvals == {"PREFUSED": 1}


def test_a_re_send_that_is_unknown_too_stays_pending_for_the_schedule_never_sent_a_third_time_at_once(
    prolific,
):
    link = link_build(fake=prolific)
    _awaiting_review(link, prolific, ["PTWICE"])
    prolific.fail(APPROVE, [500, 500])  # refused twice: the first send and the one re-send
    report = submissions_approve(link=link)
    assert report.approved == 0 and report.pending == 1
    assert report.summary() == "1 approval is waiting for Prolific to confirm; checking again in 5 minutes."
    assert prolific.calls.count(("POST", APPROVE)) == 2
    prolific_reconcile_all()
    assert prolific.approvals == {"PTWICE": 1} and prolific.calls.count(("POST", APPROVE)) == 3


def _bonus_participants(link, prolific, pids):
    for pid in pids:
        participant, _ = enroll(link, pid, prolific)
        finish(participant)


def test_a_bonus_pay_call_of_unknown_outcome_is_settled_from_the_submissions_bonus_payments(
    prolific, settings
):
    """A second bonus for the same participants, paid but its answer lost, and the undocumented bulk read-back
    answers 404: the submissions' `bonus_payments` (the first bonus, then both) settle it, with no human
    choice, and nobody is paid twice."""
    settings.PROLIFIC_TIMEOUT_SECONDS = 0.3
    link = link_build(fake=prolific)
    pids = ["PBON1", "PBON2", "PBON3"]
    _bonus_participants(link, prolific, pids)
    bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.05"))
    assert bonuses_pay(link=link).paid_batches == 1  # the first bonus, 0.15 each, confirmed
    bonuses_import_csv(link=link, text="PBON1,1.00\nPBON2,0.50\nPBON3,0.25\n", reason="top-raters")
    prolific.pay_hangs_after_success = 1.0  # paid, the answer lost
    prolific.bonus_readback_missing = True
    first = bonuses_pay(link=link)
    assert first.pending == 1 and first.to_check == 0
    second = bonuses_pay(link=link)
    assert second.reconciled == 1 and second.pending == 0 and second.to_check == 0
    batch = BonusBatch.objects.order_by("pk").last()
    assert batch.state == BonusBatch.State.PAID and "every line shows" in batch.last_error
    for _ in range(2):
        bonuses_pay(link=link)
        prolific_reconcile_all()
    assert set(prolific.pay_calls.values()) == {1} and len(prolific.pay_calls) == 2
    assert prolific.bonus_paid == {
        ("PBON1", "0.15"): 1,
        ("PBON2", "0.15"): 1,
        ("PBON3", "0.15"): 1,
        ("PBON1", "1.00"): 1,
        ("PBON2", "0.50"): 1,
        ("PBON3", "0.25"): 1,
    }


def test_a_pay_call_refused_without_a_read_back_waits_for_prolifics_lag_then_asks_never_paying_twice(
    prolific,
):
    link = link_build(fake=prolific)
    _bonus_participants(link, prolific, ["PLAG"])
    bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.05"))
    prolific.fail("bulk-bonus-payments/", [503])  # refused before paying: its outcome unknown here
    prolific.bonus_readback_missing = True
    bonuses_pay(link=link)
    report = bonuses_pay(link=link)  # no line shows yet: Prolific pays asynchronously, so it waits
    batch = BonusBatch.objects.get()
    assert report.pending == 1 and batch.state == BonusBatch.State.PAYING
    assert "Waiting for Prolific" in batch.last_error
    BonusBatch.objects.update(pay_claimed_at=timezone.now() - PAYMENT_LAG - timedelta(minutes=1))
    report = bonuses_pay(link=link)
    batch.refresh_from_db()
    assert batch.state == BonusBatch.State.CHECK and report.to_check == 1
    assert "none of its lines shows" in batch.last_error
    assert sum(prolific.pay_calls.values()) == 0 and prolific.bonus_paid == {}
