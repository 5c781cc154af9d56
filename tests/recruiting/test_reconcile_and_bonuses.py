"""Reconciliation through `manage.py prolific_sync` (every page, repairing lost webhooks) and bonuses paid
exactly once, even when Prolific's pay call succeeds and its answer is lost."""

import json
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from recruiting.bonuses import BonusError, bonuses_grant_per_rating, bonuses_import_csv, bonuses_pay
from recruiting.models import Bonus, BonusBatch, ProlificSubmission
from studies.balancing import condition_counts
from studies.models import Assignment, Participant

from .conftest import enroll, finish, link_build

pytestmark = pytest.mark.django_db


def sync(slug) -> dict:
    out = StringIO()
    call_command("prolific_sync", slug, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_prolific_sync_repairs_lost_webhooks_past_the_first_page(prolific):
    link = link_build(fake=prolific, quota=30, conditions=2, auto_approve=True)
    people = [enroll(link, f"P{i:03d}", prolific) for i in range(45)]
    for participant, _ in people[:30]:
        finish(participant)
    # No webhook ever arrived. On Prolific: 30 awaiting review, 10 returned, 5 timed out — the last ones
    # sit on the third page.
    for _, sub in people[:30]:
        prolific.set_status(sub["id"], "AWAITING REVIEW")
    for _, sub in people[30:40]:
        prolific.set_status(sub["id"], "RETURNED")
    for _, sub in people[40:]:
        prolific.set_status(sub["id"], "TIMED-OUT")

    report = sync(link.study.slug)

    assert report["seen"] == 45 and report["freed"] == 15 and report["approved"] == 30
    statuses = dict(Participant.objects.filter(study=link.study).values_list("external_id", "status"))
    assert all(statuses[f"P{i:03d}"] == "returned" for i in range(30, 40))
    assert all(statuses[f"P{i:03d}"] == "timed_out" for i in range(40, 45))
    assert not Assignment.objects.filter(participant__study=link.study, answered_at__isnull=True).exists()
    assert sum(condition_counts(study=link.study).values()) == 30
    assert sorted(prolific.approvals) == [f"P{i:03d}" for i in range(30)]
    assert set(prolific.approvals.values()) == {1}
    # Run again: it reads the approvals back (30 changes), approves nobody twice; a third run changes nothing.
    again = sync(link.study.slug)
    assert again["changed"] == 30 and again["approved"] == 0
    assert sync(link.study.slug)["changed"] == 0
    assert set(ProlificSubmission.objects.filter(link=link).values_list("status", flat=True)) == {
        "APPROVED",
        "RETURNED",
        "TIMED-OUT",
    }
    assert set(prolific.approvals.values()) == {1}


def test_prolific_sync_flags_a_participant_completed_here_but_missing_there(prolific):
    link = link_build(fake=prolific)
    participant, _ = enroll(link, "PGHOST")  # no submission on Prolific
    finish(participant)
    assert sync(link.study.slug)["missing_on_prolific"] == ["PGHOST"]
    from recruiting.selectors import participants_beside_prolific

    rows = {r.pid: r for r in participants_beside_prolific(link=link)}
    assert rows["PGHOST"].mismatch == "completed here, missing on Prolific"


def test_prolific_sync_refuses_an_unlinked_study(prolific):
    link = link_build(created=False)
    with pytest.raises(CommandError, match="not been created"):
        call_command("prolific_sync", link.study.slug)
    with pytest.raises(CommandError, match="not linked"):
        call_command("prolific_sync", "no-such-study")


def test_bonuses_per_rating_are_granted_once_and_paid_once(prolific):
    link = link_build(fake=prolific)
    participant, _ = enroll(link, "PBON", prolific)
    finish(participant)
    assert bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.10")) == 1
    assert bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.10")) == 0
    assert Bonus.objects.get().amount == Decimal("0.30")  # three ratings
    assert bonuses_pay(link=link).paid_bonuses == 1
    assert bonuses_pay(link=link).paid_bonuses == 0
    assert prolific.bonus_paid == {("PBON", "0.30"): 1}
    bulk = next(iter(prolific.bulk_bonuses.values()))
    assert bulk["rows"] == [["PBON", "0.30"]]


def test_a_pay_call_that_times_out_after_it_succeeded_is_reconciled_never_paid_again(prolific, settings):
    settings.PROLIFIC_TIMEOUT_SECONDS = 0.3
    link = link_build(fake=prolific)
    participant, _ = enroll(link, "PSLOW", prolific)
    finish(participant)
    bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.05"))
    prolific.pay_hangs_after_success = 1.0
    first = bonuses_pay(link=link)
    assert first.paid_bonuses == 0 and first.pending == 1
    batch = BonusBatch.objects.get()
    assert batch.state == BonusBatch.State.PAYING and "no answer" in batch.last_error
    second = bonuses_pay(link=link)  # the retry reads the bulk bonus's status instead of paying again
    assert second.reconciled == 1 and second.pending == 0
    assert sum(prolific.pay_calls.values()) == 1
    assert prolific.bonus_paid == {("PSLOW", "0.15"): 1}
    batch.refresh_from_db()
    assert batch.state == BonusBatch.State.PAID


def test_a_pay_call_refused_before_paying_is_paid_by_the_next_run(prolific):
    link = link_build(fake=prolific)
    participant, _ = enroll(link, "PREF", prolific)
    finish(participant)
    bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.05"))
    prolific.fail("bulk-bonus-payments/", [503])  # not retried: the pay call is made once per run
    assert bonuses_pay(link=link).paid_bonuses == 0
    report = bonuses_pay(link=link)  # status read back: SET_UP, so paying again is safe
    assert report.pending == 0
    assert prolific.bonus_paid == {("PREF", "0.15"): 1}


def test_a_bonus_csv_with_one_bad_line_is_refused_whole(prolific):
    link = link_build(fake=prolific)
    for pid in ("PA", "PB"):
        enroll(link, pid, prolific)
    with pytest.raises(BonusError) as error:
        bonuses_import_csv(
            link=link, text="participant_id,amount\nPA,1.50\nPB,abc\nPZ,1\nPA,2\n", reason="june"
        )
    message = str(error.value)
    assert "line 3" in message and "line 4" in message and "line 5" in message
    assert not Bonus.objects.exists()
    assert bonuses_import_csv(link=link, text="PA,1.50\nPB,0.75\n", reason="june") == 2
    assert (
        bonuses_import_csv(link=link, text="PA,1.50\nPB,0.75\n", reason="june") == 0
    )  # same reason: no more
    bonuses_pay(link=link)
    assert prolific.bonus_paid == {("PA", "1.50"): 1, ("PB", "0.75"): 1}


def test_a_linked_study_refuses_another_studys_link_with_a_friendly_page(client, prolific):
    link = link_build(fake=prolific)
    url = f"/s/{link.study.slug}/"
    wrong = client.get(url, {"PROLIFIC_PID": "PWRONG", "STUDY_ID": "someotherstudy", "SESSION_ID": "s1"})
    assert wrong.status_code == 400
    assert "This link does not work" in wrong.content.decode()
    assert not Participant.objects.filter(external_id="PWRONG").exists()
    right = client.get(
        url, {"PROLIFIC_PID": "PRIGHT", "STUDY_ID": link.prolific_study_id, "SESSION_ID": "s2"}
    )
    assert right.status_code == 200  # enrolled: the consent page
    assert Participant.objects.filter(external_id="PRIGHT", platform_session_id="s2").exists()


def test_submission_rows_point_at_our_participants(prolific):
    link = link_build(fake=prolific)
    participant, sub = enroll(link, "PLINK", prolific)
    sync(link.study.slug)
    assert ProlificSubmission.objects.get(submission_id=sub["id"]).participant == participant


def test_the_beat_job_processes_lost_tasks_repairs_statuses_and_makes_places_follow_quotas(prolific):
    from recruiting.launch import prolific_study_act
    from recruiting.models import WebhookEvent
    from recruiting.tasks import prolific_reconcile_all

    link = link_build(fake=prolific, quota=5)
    prolific_study_act(link=link, action="publish")
    left, sub_left = enroll(link, "PBEAT1", prolific)
    lost, sub_lost = enroll(link, "PBEAT2", prolific)
    # An event stored but whose task never ran (the worker died), and a status change whose webhook was lost.
    prolific.set_status(sub_left["id"], "RETURNED")
    WebhookEvent.objects.create(
        event_id="orphan",
        link=link,
        event_type="submission.status.change",
        resource_id=sub_left["id"],
        body=prolific.submission_event(sub_left["id"]),
    )
    prolific.set_status(sub_lost["id"], "TIMED-OUT")
    link.study.conditions.filter(name="arm1").update(quota=8)

    done = prolific_reconcile_all()

    assert done[link.study.slug]["seen"] == 2
    assert WebhookEvent.objects.get().processed_at is not None
    statuses = dict(Participant.objects.filter(study=link.study).values_list("external_id", "status"))
    assert statuses == {"PBEAT1": "returned", "PBEAT2": "timed_out"}
    assert prolific.studies[link.prolific_study_id]["total_available_places"] == 13
