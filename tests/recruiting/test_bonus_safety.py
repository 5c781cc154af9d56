"""One id Prolific does not know can no longer block a study's bonuses; a payment Prolific does not confirm is
left to the researcher, never paid twice and never silently stuck; flagged participants get no per-rating bonus
unless the study says so; Retry-After is honoured as sent; errors read as words with a next step; webhook subscriptions are made and verified from the platform. Against the loopback
Prolific, which refuses a bulk bonus naming an id that is not a submission of the study, as Prolific documents."""

import html
import time
from decimal import Decimal

import pytest
from django.urls import reverse

from recruiting.bonuses import bonuses_grant_per_rating, bonuses_pay
from recruiting.client import ProlificClient, ProlificError
from recruiting.hooks import HooksError, hooks_subscribe
from recruiting.models import Bonus, BonusBatch
from recruiting.tasks import prolific_reconcile_all
from tests.factories import AttentionCheckFactory

from .conftest import enroll, finish, link_build

pytestmark = pytest.mark.django_db


def _completed(link, prolific, pids, *, on_prolific=True):
    for pid in pids:
        participant, _ = enroll(link, pid, prolific if on_prolific else None)
        finish(participant)


def test_a_made_up_id_that_completes_is_reported_and_the_real_participants_are_paid_once_each(prolific):
    link = link_build(fake=prolific)
    _completed(link, prolific, ["PREAL1", "PREAL2", "PREAL3"])
    _completed(link, prolific, ["PMADEUP"], on_prolific=False)  # arrived with a PROLIFIC_PID of its own
    assert bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.10")) == 4

    report = bonuses_pay(link=link)
    assert report.paid_bonuses == 3 and report.held_pids == ["PMADEUP"]
    assert "Held back, not submissions of this study on Prolific (never sent): PMADEUP" in report.summary()
    assert prolific.bonus_paid == {("PREAL1", "0.30"): 1, ("PREAL2", "0.30"): 1, ("PREAL3", "0.30"): 1}

    # Again, and through the scheduled reconcile: nobody is paid twice, the made-up id is still only reported.
    assert bonuses_pay(link=link).held_pids == ["PMADEUP"]
    prolific_reconcile_all()
    assert set(prolific.bonus_paid.values()) == {1} and sum(prolific.pay_calls.values()) == 1
    assert Bonus.objects.get(prolific_pid="PMADEUP").batch is None
    assert not any(
        "PMADEUP" in "".join(",".join(r) for r in b["rows"]) for b in prolific.bulk_bonuses.values()
    )


def test_a_batch_stuck_on_an_invalid_id_is_refused_without_blocking_and_released_from_the_admin(
    prolific, staff_client
):
    """A batch gathered before the check (the made-up id frozen in its CSV): Prolific refuses it, the refusal
    reads as words with a next step, later bonuses are still paid, and the admin releases it."""
    link = link_build(fake=prolific)
    _completed(link, prolific, ["PREAL1"])
    _completed(link, prolific, ["PMADEUP"], on_prolific=False)
    bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.10"))
    stuck = BonusBatch.objects.create(link=link, csv="PMADEUP,0.30\nPREAL1,0.30\n")
    Bonus.objects.filter(link=link).update(batch=stuck)
    _completed(link, prolific, ["PREAL2"])
    assert bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.10")) == 1  # PREAL2 only

    report = bonuses_pay(link=link)
    stuck.refresh_from_db()
    assert stuck.state == BonusBatch.State.REFUSED and report.refused == 1
    assert "Invalid ids: PMADEUP" in stuck.last_error and "Check the study's settings" in stuck.last_error
    assert '{"' not in stuck.last_error  # Prolific's words, not its raw JSON
    assert ("PREAL2", "0.30") in prolific.bonus_paid  # not blocked by the stuck batch

    page = html.unescape(
        staff_client.get(reverse("admin:recruiting_prolificstudy_change", args=[link.pk])).content.decode()
    )
    assert "Refused by Prolific" in page and "Release" in page
    staff_client.post(
        reverse("admin:recruiting_prolificstudy_act", args=[link.pk, "batch-release"]), {"batch": stuck.pk}
    )
    stuck.refresh_from_db()
    assert stuck.state == BonusBatch.State.RELEASED
    report = bonuses_pay(link=link)
    assert report.held_pids == ["PMADEUP"] and report.refused == 0
    assert prolific.bonus_paid == {("PREAL1", "0.30"): 1, ("PREAL2", "0.30"): 1}


def test_a_payment_prolific_does_not_confirm_waits_for_the_researcher_and_is_never_paid_twice(
    prolific, settings, staff_client
):
    settings.PROLIFIC_TIMEOUT_SECONDS = 0.3
    link = link_build(fake=prolific)
    _completed(link, prolific, ["PSLOW"])
    bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.05"))
    prolific.pay_hangs_after_success = 1.0  # paid, but the answer is lost
    prolific.bonus_readback_missing = True  # and the undocumented read-back answers 404
    bonuses_pay(link=link)
    sub = next(iter(prolific.submissions.values()))
    sub["bonus_payments"] = [15, 40]  # and a bonus paid by hand on Prolific: the totals tell nothing
    report = bonuses_pay(link=link)
    batch = BonusBatch.objects.get()
    assert batch.state == BonusBatch.State.CHECK and report.to_check == 1
    assert (
        "Look at the study's bonuses on Prolific" in batch.last_error
        and "paid another way" in batch.last_error
    )
    for _ in range(2):
        bonuses_pay(link=link)
        prolific_reconcile_all()
    assert sum(prolific.pay_calls.values()) == 1 and prolific.bonus_paid == {("PSLOW", "0.15"): 1}

    page = html.unescape(
        staff_client.get(reverse("admin:recruiting_prolificstudy_change", args=[link.pk])).content.decode()
    )
    assert "Paid? Check on Prolific and decide" in page
    staff_client.post(
        reverse("admin:recruiting_prolificstudy_act", args=[link.pk, "batch-paid"]), {"batch": batch.pk}
    )
    batch.refresh_from_db()
    assert batch.state == BonusBatch.State.PAID
    assert bonuses_pay(link=link).pending == 0 and sum(prolific.pay_calls.values()) == 1


def test_a_participant_flagged_for_exclusion_gets_no_per_rating_bonus_unless_the_study_chooses_it(prolific):
    link = link_build(fake=prolific)
    AttentionCheckFactory(study=link.study, after_item=1, expected_value=2)
    passed, _ = enroll(link, "PPASS", prolific)
    failed, _ = enroll(link, "PFAIL", prolific)
    finish(passed)
    finish(failed, fail_checks=True)
    assert bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.05")) == 1
    assert list(Bonus.objects.values_list("prolific_pid", flat=True)) == ["PPASS"]
    link.bonus_flagged = True
    link.save(update_fields=["bonus_flagged"])
    assert bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.05")) == 1
    assert Bonus.objects.filter(prolific_pid="PFAIL").exists()


def test_retry_after_is_waited_as_sent_and_a_wait_beyond_the_maximum_is_not_slept_through(
    prolific, monkeypatch, settings
):
    slept = []
    monkeypatch.setattr(time, "sleep", slept.append)
    link = link_build(fake=prolific)
    client = ProlificClient.for_link(link)
    prolific.fail("studies/", [429], retry_after="40")
    client.study_get(link.prolific_study_id)
    assert slept == [40.0]  # not cut to the 30 s backoff cap

    settings.PROLIFIC_RETRY_AFTER_MAX = 60
    prolific.fail("studies/", [429], retry_after="600")
    with pytest.raises(ProlificError, match="Prolific asked to wait 600 s") as caught:
        client.study_get(link.prolific_study_id)
    assert caught.value.transient and "try again in a few minutes" in str(caught.value)
    assert slept == [40.0]


def test_webhook_subscriptions_are_created_confirmed_and_verified_from_the_platform(prolific, staff_client):
    link = link_build(fake=prolific)
    with pytest.raises(HooksError, match="workspace id"):
        hooks_subscribe(link=link)
    link.workspace_id = "ws0001"
    link.save(update_fields=["workspace_id"])
    report = hooks_subscribe(link=link)
    target = f"https://studies.example.org/recruiting/prolific/webhook/{link.study.slug}/"
    assert report.target_url == target and report.missing == []
    assert sorted(report.verified) == ["study.status.change", "submission.status.change"]
    assert {(h["event_type"], h["target_url"], h["is_enabled"]) for h in prolific.hooks.values()} == {
        ("submission.status.change", target, True),
        ("study.status.change", target, True),
    }
    staff_client.post(reverse("admin:recruiting_prolificstudy_act", args=[link.pk, "webhooks"]))
    assert len(prolific.hooks) == 2  # run again (from the admin): kept, none added
