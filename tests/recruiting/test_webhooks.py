"""Webhooks through the HTTP endpoint: the signature checked as Prolific documents it, each event stored
once whatever the redeliveries, processed by the task in any order with the same end state, and the
effects: places and items freed at once, passed submissions approved in bulk, failed checks left to the
admin."""

import time

import pytest

from recruiting.models import ProlificSubmission, WebhookEvent
from recruiting.tasks import process_webhook_event
from studies.balancing import condition_counts
from studies.models import Assignment, Participant
from tests.factories import AttentionCheckFactory

from .conftest import SECRET, enroll, finish, link_build

pytestmark = pytest.mark.django_db


def deliver(client, link, payload, *, event_id, event_time=None, secret=SECRET, sent=None):
    body, headers = type_signed(secret, payload, event_id=event_id, event_time=event_time, sent=sent)
    return client.post(
        f"/recruiting/prolific/webhook/{link.study.slug}/",
        data=body,
        content_type="application/json",
        headers=headers,
    )


def type_signed(secret, payload, **kwargs):
    from .loopback import LoopbackProlific

    return LoopbackProlific.signed(secret, payload, **kwargs)


def run_enqueued(callbacks):
    """The Celery tasks the view enqueued on commit, run as a worker would (here, in this order)."""
    for callback in callbacks:
        callback()


def test_a_bad_or_stale_signature_is_refused_and_nothing_is_stored(client, prolific):
    link = link_build(fake=prolific)
    payload = {
        "resource_id": "x",
        "event_type": "submission.status.change",
        "participant_id": "P",
        "status": "RETURNED",
    }
    assert deliver(client, link, payload, event_id="e1", secret="wrong").status_code == 401
    assert deliver(client, link, payload, event_id="e2", sent=time.time() - 3600).status_code == 401
    response = client.post(
        f"/recruiting/prolific/webhook/{link.study.slug}/", data=b"{}", content_type="application/json"
    )
    assert response.status_code == 401
    assert WebhookEvent.objects.count() == 0


def test_with_the_secret_unset_a_caller_gets_a_generic_503_and_the_log_names_the_variable(
    client, prolific, monkeypatch, caplog
):
    link = link_build(fake=prolific)
    monkeypatch.delenv(link.webhook_secret_env)
    payload = {"resource_id": "x", "event_type": "study.status.change", "status": "PAUSED"}
    with caplog.at_level("ERROR", logger="recruiting.webhooks"):
        response = deliver(client, link, payload, event_id="e-unset")
    assert response.status_code == 503
    assert response.json() == {"error": "The webhook is not available; try again later."}
    assert link.webhook_secret_env not in response.content.decode()
    assert link.webhook_secret_env in caplog.text and "is not set" in caplog.text
    assert WebhookEvent.objects.count() == 0


def test_a_returned_participant_delivered_three_times_frees_the_place_and_items_once(
    client, prolific, django_capture_on_commit_callbacks, monkeypatch
):
    link = link_build(fake=prolific, quota=1, conditions=1)
    participant, sub = enroll(link, "PRET", prolific)
    assert Assignment.objects.filter(participant=participant).count() == 3
    assert condition_counts(study=link.study) == {participant.condition_id: 1}
    prolific.set_status(sub["id"], "RETURNED")
    payload = prolific.submission_event(sub["id"])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        answers = [deliver(client, link, payload, event_id="evt-ret-1") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert [a.json()["duplicate"] for a in answers] == [False, True, True]
    assert len(callbacks) == 1  # one task enqueued for three deliveries
    event = WebhookEvent.objects.get()
    assert event.deliveries == 3 and event.processed_at is None  # the view did not do the work
    run_enqueued(callbacks)
    participant.refresh_from_db()
    assert participant.status == Participant.Status.RETURNED
    assert Assignment.objects.filter(participant=participant, answered_at__isnull=True).count() == 0
    assert condition_counts(study=link.study) == {participant.condition_id: 0}
    # A redelivered task (the broker's at-least-once) finds the event done.
    assert process_webhook_event(event.pk) is None


def test_events_out_of_order_end_in_the_latest_status(client, prolific, django_capture_on_commit_callbacks):
    link = link_build(fake=prolific)
    participant, sub = enroll(link, "POOO", prolific)
    active = {**prolific.submission_event(sub["id"]), "status": "ACTIVE"}
    timed_out = {**prolific.submission_event(sub["id"]), "status": "TIMED-OUT"}
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        for _ in range(3):  # every event three times, the later one first
            deliver(client, link, timed_out, event_id="evt-2", event_time=200.0)
            deliver(client, link, active, event_id="evt-1", event_time=100.0)
    assert len(callbacks) == 2
    run_enqueued(callbacks)
    row = ProlificSubmission.objects.get(submission_id=sub["id"])
    assert row.status == "TIMED-OUT" and row.last_event_id == "evt-2"
    participant.refresh_from_db()
    assert participant.status == Participant.Status.TIMED_OUT
    assert not Assignment.objects.filter(participant=participant, answered_at__isnull=True).exists()


def test_a_late_active_event_does_not_undo_a_completed_review(
    client, prolific, django_capture_on_commit_callbacks
):
    link = link_build(fake=prolific)
    participant, sub = enroll(link, "PLATE", prolific)
    finish(participant)
    with django_capture_on_commit_callbacks(execute=True):
        deliver(
            client, link, {**prolific.submission_event(sub["id"]), "status": "AWAITING REVIEW"}, event_id="a"
        )
        deliver(client, link, {**prolific.submission_event(sub["id"]), "status": "ACTIVE"}, event_id="b")
    assert ProlificSubmission.objects.get(submission_id=sub["id"]).status == "AWAITING REVIEW"
    participant.refresh_from_db()
    assert participant.status == Participant.Status.COMPLETED


def test_auto_approve_approves_passed_checks_in_bulk_and_lists_failed_checks_for_the_admin(
    client, prolific, django_capture_on_commit_callbacks
):
    link = link_build(fake=prolific, auto_approve=True)
    AttentionCheckFactory(study=link.study, after_item=1, expected_value=2)
    passed, sub_passed = enroll(link, "PPASS", prolific)
    failed, sub_failed = enroll(link, "PFAIL", prolific)
    finish(passed)
    finish(failed, fail_checks=True)
    assert failed.flagged_for_exclusion
    for sub in (sub_passed, sub_failed):
        prolific.set_status(sub["id"], "AWAITING REVIEW")
    with django_capture_on_commit_callbacks(execute=True):
        for sub in (sub_passed, sub_failed):
            for _ in range(3):
                deliver(client, link, prolific.submission_event(sub["id"]), event_id=f"rev-{sub['id']}")
    assert prolific.approvals == {"PPASS": 1}
    assert prolific.submissions[sub_failed["id"]]["status"] == "AWAITING REVIEW"  # never rejected by us
    from recruiting.submissions import needs_decision

    assert [s.prolific_pid for s in needs_decision(link)] == ["PFAIL"]


def test_without_auto_approve_nothing_is_approved(client, prolific, django_capture_on_commit_callbacks):
    link = link_build(fake=prolific, auto_approve=False)
    participant, sub = enroll(link, "PMAN", prolific)
    finish(participant)
    prolific.set_status(sub["id"], "AWAITING REVIEW")
    with django_capture_on_commit_callbacks(execute=True):
        deliver(client, link, prolific.submission_event(sub["id"]), event_id="m1")
    assert prolific.approvals == {}


def test_a_timed_out_submission_that_later_sends_a_code_is_not_approved(
    client, prolific, django_capture_on_commit_callbacks
):
    link = link_build(fake=prolific, auto_approve=True)
    participant, sub = enroll(link, "PTO", prolific)
    with django_capture_on_commit_callbacks(execute=True):
        deliver(client, link, {**prolific.submission_event(sub["id"]), "status": "TIMED-OUT"}, event_id="t1")
        deliver(
            client, link, {**prolific.submission_event(sub["id"]), "status": "AWAITING REVIEW"}, event_id="t2"
        )
    participant.refresh_from_db()
    assert participant.status == Participant.Status.TIMED_OUT
    assert prolific.approvals == {}


def test_an_event_for_a_submission_this_study_never_saw_is_left_for_reconciliation(
    client, prolific, django_capture_on_commit_callbacks
):
    link = link_build(fake=prolific)
    stranger = prolific.add_submission("another-study", "PSTRANGER", "RETURNED")
    with django_capture_on_commit_callbacks(execute=True):
        deliver(client, link, prolific.submission_event(stranger["id"]), event_id="stranger-1")
    assert not ProlificSubmission.objects.exists()
    assert "left for reconciliation" in WebhookEvent.objects.get().outcome


def _post_raw(client, link, body, headers):
    return client.post(
        f"/recruiting/prolific/webhook/{link.study.slug}/",
        data=body,
        content_type="application/json",
        headers=headers,
    )


def test_a_replay_with_a_new_event_id_or_a_future_time_changes_nothing(
    client, prolific, django_capture_on_commit_callbacks
):
    """The signature covers the timestamp and body, not X-Event-ID or X-Timestamp: a captured request re-sent with
    a new event id is a duplicate (same signature); a signed time far ahead is refused; an unsigned X-Timestamp
    far ahead cannot put an event after genuine later ones."""
    link = link_build(fake=prolific)
    participant, sub = enroll(link, "PREPLAY", prolific)
    returned = {**prolific.submission_event(sub["id"]), "status": "RETURNED"}
    now = time.time()
    body, headers = type_signed(SECRET, returned, event_id="genuine-1", sent=now)
    with django_capture_on_commit_callbacks(execute=True):
        assert _post_raw(client, link, body, headers).json()["duplicate"] is False
    participant.refresh_from_db()
    assert participant.status == Participant.Status.RETURNED
    state = (ProlificSubmission.objects.get(submission_id=sub["id"]).status, participant.status)

    # The same request with a new event id: refused, nothing stored, nothing enqueued.
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        replay = _post_raw(client, link, body, {**headers, "X-Event-ID": "replayed-with-a-new-id"})
    assert replay.status_code == 409 and "Replayed request" in replay.json()["error"] and not callbacks
    assert WebhookEvent.objects.count() == 1 and WebhookEvent.objects.get().deliveries == 1
    # The same request with its own event id (a duplicate delivery) is acknowledged as before.
    assert _post_raw(client, link, body, headers).json()["duplicate"] is True

    # Signed ten million seconds ahead: refused, nothing stored.
    active = {**prolific.submission_event(sub["id"]), "status": "ACTIVE"}
    future = deliver(client, link, active, event_id="future-1", sent=now + 10**7, event_time=now + 10**7)
    assert future.status_code == 401 and "future" in future.json()["error"]
    assert not WebhookEvent.objects.filter(event_id="future-1").exists()
    participant.refresh_from_db()
    assert (ProlificSubmission.objects.get(submission_id=sub["id"]).status, participant.status) == state


def test_an_unsigned_event_time_in_the_future_cannot_hide_later_events(
    client, prolific, django_capture_on_commit_callbacks
):
    link = link_build(fake=prolific)
    participant, sub = enroll(link, "PSKEW", prolific)
    now = time.time()
    active = {**prolific.submission_event(sub["id"]), "status": "ACTIVE"}
    timed_out = {**prolific.submission_event(sub["id"]), "status": "TIMED-OUT"}
    with django_capture_on_commit_callbacks(execute=True):
        deliver(client, link, active, event_id="skew-1", sent=now - 5, event_time=now + 10**7)
        deliver(client, link, timed_out, event_id="skew-2", sent=now)
    stored = WebhookEvent.objects.get(event_id="skew-1").event_time.timestamp()
    assert stored <= now - 4  # the signed time, not the stated one
    assert ProlificSubmission.objects.get(submission_id=sub["id"]).status == "TIMED-OUT"


@pytest.mark.parametrize(
    ("case", "says"),
    [("long event id", "X-Event-ID is longer than 100 characters"), ("nul", "NUL character")],
)
def test_bad_bytes_get_a_400_that_says_why_and_nothing_is_stored(client, prolific, case, says):
    link = link_build(fake=prolific)
    payload = {"resource_id": "s1", "event_type": "submission.status.change", "status": "RETURNED"}
    event_id = "e" * 101 if case == "long event id" else "nul-1"
    if case == "nul":
        payload["participant_id"] = "P\u0000X"
    for _ in range(2):  # the second delivery too (it used to be stored cut, then looked up in full)
        answer = deliver(client, link, payload, event_id=event_id)
        assert answer.status_code == 400 and says in answer.json()["error"]
    assert WebhookEvent.objects.count() == 0
