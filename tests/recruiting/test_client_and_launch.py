"""The Prolific client against the loopback Prolific: every page read, transient errors retried, permanent
ones not; creating, publishing, pausing, resuming and stopping the study; places following the quotas."""

import pytest
from django.core.exceptions import ValidationError

from recruiting.client import ProlificClient, ProlificError, ProlificTokenMissing
from recruiting.launch import LaunchError, prolific_places_sync, prolific_study_act, prolific_study_create

from .conftest import link_build

pytestmark = pytest.mark.django_db


def test_it_reads_every_page_of_submissions_not_only_the_first(prolific):
    link = link_build(fake=prolific)
    for i in range(47):
        prolific.add_submission(link.prolific_study_id, f"P{i:03d}")
    seen = list(ProlificClient.for_link(link).submissions(link.prolific_study_id))
    assert sorted(s["participant_id"] for s in seen) == [f"P{i:03d}" for i in range(47)]
    pages = [c for c in prolific.calls if c[1].endswith("/submissions/")]
    assert len(pages) == 3  # 20 + 20 + 7


def test_it_retries_429_honouring_retry_after_and_5xx_then_succeeds(prolific):
    link = link_build(fake=prolific)
    prolific.fail(f"studies/{link.prolific_study_id}/", [429, 503, 502], retry_after="0")
    study = ProlificClient.for_link(link).study_get(link.prolific_study_id)
    assert study["id"] == link.prolific_study_id
    gets = [c for c in prolific.calls if c == ("GET", f"studies/{link.prolific_study_id}/")]
    assert len(gets) == 4


def test_it_gives_up_after_the_attempts_and_says_the_failure_is_transient(prolific):
    link = link_build(fake=prolific)
    prolific.fail(f"studies/{link.prolific_study_id}/", [500] * 10)
    with pytest.raises(ProlificError) as error:
        ProlificClient.for_link(link).study_get(link.prolific_study_id)
    assert error.value.transient and error.value.status == 500


def test_a_permanent_error_is_not_retried(prolific):
    link = link_build(fake=prolific)
    prolific.fail("studies/", [400])
    with pytest.raises(ProlificError) as error:
        ProlificClient.for_link(link).study_get(link.prolific_study_id)
    assert not error.value.transient and error.value.status == 400
    assert len([c for c in prolific.calls if c[0] == "GET"]) == 1


def test_the_token_comes_from_the_named_environment_variable(prolific, monkeypatch):
    link = link_build(fake=prolific)
    assert "Token test-token-abc" in prolific.tokens_seen
    monkeypatch.delenv(link.token_env)
    with pytest.raises(ProlificTokenMissing, match=link.token_env):
        ProlificClient.for_link(link)


@pytest.mark.parametrize("bad", ["sk-live-abc123", "1TOKEN", "MY TOKEN", "TOKEN=abc", ""])
def test_the_token_variable_must_be_a_name_never_a_token(prolific, bad):
    link = link_build(created=False)
    link.token_env = bad
    with pytest.raises(ValidationError):
        link.full_clean()


def test_create_sends_the_study_as_a_draft_with_places_equal_to_the_quotas(prolific):
    link = link_build(created=False, quota=7, conditions=3)
    link.study.conditions.filter(name="arm2").update(quota=4)
    prolific_study_create(link=link)
    sent = prolific.studies[link.prolific_study_id]
    assert sent["status"] == "UNPUBLISHED" and link.state == "UNPUBLISHED"
    assert sent["total_available_places"] == 7 + 7 + 4 == link.places
    assert sent["external_study_url"] == (
        f"https://studies.example.org/s/{link.study.slug}/"
        "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )
    assert sent["reward"] == 150 and sent["estimated_completion_time"] == 10
    assert sent["device_compatibility"] == ["desktop", "tablet", "mobile"]
    codes = {c["code"]: c for c in sent["completion_codes"]}
    assert codes["C0MPLETE"]["code_type"] == "COMPLETED"
    assert codes["FAILEDCK"]["actions"] == [{"action": "MANUALLY_REVIEW"}]
    with pytest.raises(LaunchError, match="already on Prolific"):
        prolific_study_create(link=link)


def test_publish_pause_resume_stop_follow_prolifics_states_and_refuse_out_of_order(prolific):
    link = link_build(fake=prolific)
    with pytest.raises(LaunchError, match="Cannot pause"):
        prolific_study_act(link=link, action="pause")
    for action, state in [
        ("publish", "ACTIVE"),
        ("pause", "PAUSED"),
        ("resume", "ACTIVE"),
        ("stop", "AWAITING REVIEW"),
    ]:
        link = prolific_study_act(link=link, action=action)
        assert link.state == state == prolific.studies[link.prolific_study_id]["status"]
    transitions = [c for c in prolific.calls if c[1].endswith("/transition/")]
    assert len(transitions) == 4


def test_places_follow_the_quotas(prolific):
    link = link_build(fake=prolific, quota=5)
    assert link.places == 10
    link.study.conditions.filter(name="arm0").update(quota=12)
    assert prolific_places_sync(link=link) is True
    assert prolific.studies[link.prolific_study_id]["total_available_places"] == 17 == link.places
    assert prolific_places_sync(link=link) is False  # already right: no call
