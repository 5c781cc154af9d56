"""Made-up ids, session takeover and the per-participant limit, on the real participant pages."""

import re
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.contrib.sessions.backends.db import SessionStore as DbSessionStore
from django.test import Client
from django.utils import timezone

from ratings.selectors import session_key
from studies.balancing import condition_counts
from studies.models import Participant
from studies.participants import participants_release_stale

from .flow_helpers import hidden_fields, live_study, post_step

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _limits(limits_on):
    pass


@pytest.fixture
def study():
    study = live_study(prompts=30)
    study.enrollments_per_address = 3  # the study's own choice: no limit unless it sets one
    study.save(update_fields=["enrollments_per_address"])
    return study


def _enter(client, study, pid, *, session_id="se", study_id="st", **extra):
    query = {"PROLIFIC_PID": pid, "SESSION_ID": session_id, "STUDY_ID": study_id}
    return client.get(f"/s/{study.slug}/", {k: v for k, v in query.items() if v is not None}, **extra)


# --- made-up ids --------------------------------------------------------------------------------------


def test_one_address_cannot_hold_more_than_the_configured_number_of_places(study):
    client = Client()
    statuses = [_enter(client, study, f"fake{i:04x}").status_code for i in range(20)]
    assert statuses[:3] == [200, 200, 200]  # enrolled: the consent page, without a redirect
    assert set(statuses[3:]) == {429}
    assert Participant.objects.filter(study=study).count() == 3
    refused = _enter(Client(), study, "fake-more")
    assert "at most 3 new sessions an hour from one network" in refused.content.decode()
    assert int(refused["Retry-After"]) > 0
    # Another address still gets in.
    assert _enter(Client(REMOTE_ADDR="203.0.113.9"), study, "real-person").status_code == 200
    assert Participant.objects.filter(study=study).count() == 4


def test_without_a_limit_of_its_own_a_study_takes_everyone_behind_one_address(study):
    study.enrollments_per_address = None
    study.save(update_fields=["enrollments_per_address"])
    statuses = [_enter(Client(), study, f"lab{i:02d}").status_code for i in range(8)]
    assert statuses == [200] * 8  # a lab or a campus behind one address
    assert Participant.objects.filter(study=study).count() == 8


def test_resuming_an_existing_participant_is_not_counted_as_a_new_enrollment(study):
    client = Client()
    assert _enter(client, study, "same-person").status_code == 200  # enrolled: the consent page
    for _ in range(5):
        assert _enter(client, study, "same-person").status_code == 302  # resumed: to the step page
    assert _enter(Client(), study, "second").status_code == 200
    assert Participant.objects.filter(study=study).count() == 2


def test_the_per_study_limit_applies_across_addresses(study, settings):
    settings.RATELIMIT_ENROLL_PER_STUDY = 4
    codes = [_enter(Client(REMOTE_ADDR=f"198.51.100.{i}"), study, f"p{i}").status_code for i in range(6)]
    assert codes == [200] * 4 + [429] * 2
    assert (
        "More people started this study in the last hour" in _enter(Client(), study, "late").content.decode()
    )
    assert Participant.objects.filter(study=study).count() == 4


def test_a_link_naming_another_study_is_refused_where_the_study_knows_its_platform_id(study):
    study.platform_study_id = "60f1c0ffee"
    study.save(update_fields=["platform_study_id"])
    assert _enter(Client(), study, "wrong", study_id="someotherstudy").status_code == 400
    assert _enter(Client(), study, "none", study_id=None).status_code == 400
    assert not Participant.objects.filter(study=study).exists()
    assert _enter(Client(), study, "right", study_id="60f1c0ffee").status_code == 200
    assert Participant.objects.filter(study=study).count() == 1


def test_before_consent_a_place_is_held_only_for_the_consent_hold(study, settings):
    settings.PARTICIPANT_CONSENT_HOLD_MINUTES = 10
    study.time_limit_minutes = 60
    study.save(update_fields=["time_limit_minutes"])
    lingering = Client()
    _enter(lingering, study, "only-opened-the-link")
    consenting = Client()
    _enter(consenting, study, "agreed", session_id="s2")
    post_step(consenting, study, {"step": "consent", "decision": "agree"})

    later = timezone.now() + timedelta(minutes=15)
    assert sum(condition_counts(study=study, now=later).values()) == 1  # only the one who agreed
    assert participants_release_stale(now=later, study=study) == 1
    assert Participant.objects.get(external_id="only-opened-the-link").status == Participant.Status.TIMED_OUT
    assert Participant.objects.get(external_id="agreed").status == Participant.Status.ACTIVE
    assert sum(condition_counts(study=study, now=timezone.now() + timedelta(minutes=5)).values()) == 1


# --- session takeover ---------------------------------------------------------------------------------


def _started(study, pid="alice", session_id="alice-session"):
    """Alice's own browser, at her first item."""
    own = Client()
    _enter(own, study, pid, session_id=session_id)
    post_step(own, study, {"step": "consent", "decision": "agree"})
    post_step(own, study, {"step": "instructions"})
    return own


def test_a_fresh_browser_with_someone_elses_id_cannot_see_answer_or_return_them(study):
    own = _started(study)
    alice = Participant.objects.get(study=study, external_id="alice")
    item_page = own.get(f"/s/{study.slug}/step/").content.decode()

    intruder = Client()
    refused = _enter(intruder, study, "alice", session_id="guessed")
    assert refused.status_code == 409
    assert "Already started in another browser" in refused.content.decode()
    # Without SESSION_ID at all: the same.
    assert _enter(intruder, study, "alice", session_id=None).status_code == 409
    # The intruder's session holds nobody: the step page sends them back to the entry.
    step = intruder.get(f"/s/{study.slug}/step/")
    assert step.status_code == 302 and step["Location"].endswith(f"/s/{study.slug}/")
    fields = hidden_fields(item_page)
    post_step(intruder, study, {**fields, "value": "3"})
    intruder.post(f"/s/{study.slug}/return/")
    alice.refresh_from_db()
    assert alice.status == Participant.Status.ACTIVE
    assert not alice.assignments.filter(answered_at__isnull=False).exists()
    # Alice's own browser carries on.
    assert "step" in hidden_fields(own.get(f"/s/{study.slug}/step/").content.decode())


def test_the_same_platform_session_resumes_in_a_new_browser(study):
    _started(study)
    again = _enter(Client(), study, "alice", session_id="alice-session", follow=True)
    assert again.status_code == 200
    assert hidden_fields(again.content.decode()).get("step") == "items"


def test_a_participant_enrolled_without_a_platform_session_cannot_be_resumed_elsewhere(study):
    _started(study, pid="bob", session_id=None)
    assert _enter(Client(), study, "bob", session_id=None).status_code == 409


def test_mturk_resume_is_bound_to_the_assignment_id(study):
    study.platform = "mturk"
    study.save(update_fields=["platform"])
    own = Client()
    own.get(f"/s/{study.slug}/", {"workerId": "W1", "assignmentId": "A1", "hitId": "H1"})
    assert Participant.objects.filter(study=study, external_id="W1").exists()
    other = Client().get(f"/s/{study.slug}/", {"workerId": "W1", "assignmentId": "A2", "hitId": "H1"})
    assert other.status_code == 409
    same = Client().get(f"/s/{study.slug}/", {"workerId": "W1", "assignmentId": "A1", "hitId": "H1"})
    # The same assignment in a new browser: their current step, shown by the entry itself.
    assert same.status_code == 200 and 'name="step" value="consent"' in same.content.decode()


def test_a_planted_session_never_names_the_participant(study):
    """Session fixation: the participant is named by their ticket (ratings/tickets.py), which the enrolment
    signs afresh; the session an attacker planted is left naming nobody."""
    planted = DbSessionStore()
    planted.create()
    client = Client()
    client.cookies[django_settings.SESSION_COOKIE_NAME] = planted.session_key
    _enter(client, study, "fixated")
    assert client.cookies[django_settings.PARTICIPANT_TICKET_COOKIE_NAME].value
    assert session_key(study.slug) not in DbSessionStore(planted.session_key).load()
    # The planted key does not reach the participant.
    attacker = Client()
    attacker.cookies[django_settings.SESSION_COOKIE_NAME] = planted.session_key
    step = attacker.get(f"/s/{study.slug}/step/")
    assert step.status_code == 302 and step["Location"].endswith(f"/s/{study.slug}/")


def test_a_planted_key_the_store_does_not_know_reaches_nobody_either(study):
    client = Client()
    client.cookies[django_settings.SESSION_COOKIE_NAME] = "plantedbyattacker0000000000000000"
    assert _enter(client, study, "fixated").status_code == 200
    assert client.cookies[django_settings.PARTICIPANT_TICKET_COOKIE_NAME].value
    attacker = Client()
    attacker.cookies[django_settings.SESSION_COOKIE_NAME] = "plantedbyattacker0000000000000000"
    step = attacker.get(f"/s/{study.slug}/step/")
    assert step.status_code == 302 and step["Location"].endswith(f"/s/{study.slug}/")


# --- the per-participant limit ------------------------------------------------------------------------


def test_made_up_ids_in_the_query_do_not_reset_the_per_participant_limit(study, settings):
    settings.RATELIMIT_PARTICIPANT = 5
    client = Client()
    _enter(client, study, "carol")  # counted by the id the entry names
    codes = [client.get(f"/s/{study.slug}/step/", {"PROLIFIC_PID": f"r{i}"}).status_code for i in range(8)]
    assert codes[:5] == [200] * 5  # then by the session, whatever the query says
    assert set(codes[5:]) == {429}


def test_a_finished_participant_opening_the_link_again_elsewhere_sees_their_code(study):
    _started(study, pid="dora", session_id=None)
    Participant.objects.filter(study=study, external_id="dora").update(
        status=Participant.Status.COMPLETED, completion_code=study.completion_code
    )
    again = _enter(Client(), study, "dora", session_id=None, follow=True)
    page = again.content.decode()
    assert again.status_code == 200 and "you have finished" in page and study.completion_code in page, (
        re.findall(r"<h1>.*?</h1>|<p[^>]*>.*?</p>", page)
    )
    assert "Already started in another browser" not in page
