"""Abuse and privacy on the real participant pages: tampered posts, injected script, CSRF, rate limits,
the honeypot, who can reach what, and whose ids anyone can see."""

import pytest
from django.core.cache import caches
from django.test import Client

from config.ratelimit import HONEYPOT_FIELD
from kinds.rating.models import Rating
from studies.models import Participant
from tests.factories import ParticipantFactory
from tests.ratelimits import rate_limits_on

from .flow_helpers import enter, hidden_fields, live_study, post_step, to_first_item

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert('pwned')</script>"


@pytest.fixture(autouse=True)
def _one_window(monkeypatch):
    """Every request of a test falls in the same one-minute window (the middle of one)."""
    from config import ratelimit

    monkeypatch.setattr(ratelimit, "_now", lambda: 1_700_000_010.0)


@pytest.fixture(autouse=True)
def _limits(settings):
    rate_limits_on(settings)


@pytest.fixture
def study():
    return live_study()


# --- tampered, oversized and garbage answers ----------------------------------------------------------


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda f, other: {**f, "value": "7"}, id="value-outside-the-scale"),
        pytest.param(lambda f, other: {**f, "value": "-1"}, id="negative-value"),
        pytest.param(lambda f, other: {**f, "value": "two"}, id="non-integer-value"),
        pytest.param(lambda f, other: {**f, "value": "2.5"}, id="fractional-value"),
        pytest.param(
            lambda f, other: {**f, "position": "not-a-number", "value": "3"}, id="non-integer-position"
        ),
        pytest.param(lambda f, other: {**f, "position": "999", "value": "3"}, id="position-that-is-not-mine"),
        pytest.param(
            lambda f, other: {**f, "position": str(other), "value": "3"},
            id="another-participants-assignment-id",
        ),
        pytest.param(lambda f, other: {**f, "step": "consent", "value": "3"}, id="wrong-step"),
        pytest.param(lambda f, other: {"step": "items"}, id="nothing-but-the-step"),
        pytest.param(lambda f, other: {**f, "value": "3" * 1_000_000}, id="one-megabyte-value"),
    ],
)
def test_a_tampered_answer_gets_4xx_or_a_redirect_and_stores_nothing(client, study, tamper):
    other_client = Client()
    other, _ = to_first_item(other_client, study, "other0000")
    other_assignment_id = other.assignments.order_by("position").first().pk
    participant, fields = to_first_item(client, study, "tamper0000")
    response = post_step(client, study, tamper(fields, other_assignment_id))
    assert 400 <= response.status_code < 500 or response.status_code == 302
    assert Rating.objects.count() == 0
    # The participant is still on their first item and can answer it normally.
    assert post_step(client, study, {**fields, "value": "3"}).status_code == 302
    assert Rating.objects.filter(assignment__participant=participant).count() == 1


def test_a_body_over_the_upload_limit_is_refused_with_400(client, study, settings):
    participant, fields = to_first_item(client, study, "big000000")
    padding = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    response = post_step(client, study, {**fields, "value": "3", "padding": padding})
    assert response.status_code == 400
    assert Rating.objects.count() == 0


@pytest.mark.parametrize(
    "body,content_type",
    [
        (b"\x00\xff\xfe garbage \x80\x81" * 100, "application/x-www-form-urlencoded"),
        (b"%%%%&&&&====" * 50, "application/x-www-form-urlencoded"),
        (b'{"step": "items", "value": 3}', "application/json"),
        (b"--x\r\nContent-Disposition: form-data; broken\r\n\r\n", "multipart/form-data; boundary=x"),
    ],
    ids=["binary", "urlencoded-noise", "json", "broken-multipart"],
)
def test_garbage_bodies_store_nothing(client, study, body, content_type):
    to_first_item(client, study, "garbage00")
    response = client.post(
        f"/s/{study.slug}/step/",
        body,
        content_type=content_type,
        headers={"X-CSRFToken": client.cookies["csrftoken"].value},
    )
    assert 400 <= response.status_code < 500 or response.status_code == 302
    assert Rating.objects.count() == 0


# --- script injection -----------------------------------------------------------------------------------


def test_script_in_the_link_parameters_is_never_echoed_unescaped(client, study):
    for params in (
        {"PROLIFIC_PID": SCRIPT},
        {"PROLIFIC_PID": "fine0001", "STUDY_ID": SCRIPT},
        {"PROLIFIC_PID": "fine0002", "SESSION_ID": SCRIPT},
        {"workerId": SCRIPT, "assignmentId": SCRIPT, "turkSubmitTo": f"javascript:{SCRIPT}"},
    ):
        response = client.get(f"/s/{study.slug}/", params, follow=True)
        assert SCRIPT not in response.content.decode()
        assert "javascript:" not in response.content.decode()
    assert not Participant.objects.filter(external_id__contains="<").exists()


def test_script_in_corpus_text_is_escaped_on_the_item_page_and_in_the_admin(client, staff_client):
    study = live_study(slug="xss", situation=SCRIPT)
    study.consent_text = SCRIPT
    study.instructions_text = SCRIPT
    study.save()
    participant = ParticipantFactory(study=study, external_id="admin-view-1")
    participant.exclusion_reasons = [SCRIPT]
    participant.save()

    consent = enter(client, study, "xss000001").content.decode()
    assert SCRIPT not in consent and "&lt;script&gt;" in consent
    post_step(client, study, {"step": "consent", "decision": "agree"})
    instructions = client.get(f"/s/{study.slug}/step/").content.decode()
    assert SCRIPT not in instructions and "&lt;script&gt;" in instructions
    post_step(client, study, {"step": "instructions"})
    item = client.get(f"/s/{study.slug}/step/").content.decode()
    assert SCRIPT not in item and "&lt;script&gt;" in item

    prompt = study.prompts.first()
    for url in (
        "/admin/studies/prompt/",
        f"/admin/studies/prompt/{prompt.pk}/change/",
        "/admin/studies/response/",
        "/admin/studies/participant/",
        f"/admin/studies/participant/{participant.pk}/change/",
        f"/admin/studies/study/{study.pk}/change/",
    ):
        response = staff_client.get(url)
        if response.status_code == 404:
            continue  # that model is not in the admin
        assert response.status_code == 200, url
        assert SCRIPT not in response.content.decode(), url


def test_script_in_corpus_text_is_escaped_on_the_dashboard(staff_client):
    study = live_study(slug="xss-dash", situation=SCRIPT)
    study.title = SCRIPT
    study.save()
    ParticipantFactory(study=study, external_id="dash-1")
    for url in ("/analysis/", f"/analysis/{study.slug}/", f"/analysis/studies/{study.slug}/"):
        response = staff_client.get(url, follow=True)
        assert SCRIPT not in response.content.decode(), url


# --- CSRF ------------------------------------------------------------------------------------------------


def test_every_participant_post_needs_the_csrf_token(study):
    browser = Client(enforce_csrf_checks=True)
    enter(browser, study, "csrf00001")
    token = browser.cookies["csrftoken"].value
    step = f"/s/{study.slug}/step/"
    refused = browser.post(step, {"step": "consent", "decision": "agree"})
    assert refused.status_code == 403 and "This page has expired" in refused.content.decode()
    assert Participant.objects.get(external_id="csrf00001").step == "consent"
    assert (
        browser.post(step, {"step": "consent", "decision": "agree", "csrfmiddlewaretoken": token}).status_code
        == 302
    )
    assert browser.post(step, {"step": "instructions"}).status_code == 403
    browser.post(step, {"step": "instructions", "csrfmiddlewaretoken": token})
    fields = hidden_fields(browser.get(step).content.decode())
    assert browser.post(step, {**fields, "value": "3"}).status_code == 403
    assert browser.post(step, {**fields, "value": "3", "csrfmiddlewaretoken": "x" * 64}).status_code == 403
    assert Rating.objects.count() == 0
    assert browser.post(f"/s/{study.slug}/return/", {}).status_code == 403
    assert browser.post(f"/s/{study.slug}/start/", {}).status_code == 403
    assert Participant.objects.get(external_id="csrf00001").status == "active"
    assert browser.post(step, {**fields, "value": "3", "csrfmiddlewaretoken": token}).status_code == 302
    assert Rating.objects.count() == 1


# --- rate limits and the honeypot on the real pages ------------------------------------------------------


def test_entry_is_rate_limited_per_ip_and_the_limited_arrival_is_not_enrolled(client, study, settings):
    settings.RATELIMIT_ENTRY_PER_IP = 3
    statuses = [enter(Client(), study, f"rl{i:07d}").status_code for i in range(4)]
    assert statuses == [200, 200, 200, 429]
    assert Participant.objects.filter(study=study).count() == 3


def test_a_participant_hammering_the_answer_page_is_rate_limited(client, study, settings):
    participant, fields = to_first_item(client, study, "hammer001")
    settings.RATELIMIT_PARTICIPANT = 5
    caches["default"].clear()
    statuses = [client.get(f"/s/{study.slug}/step/").status_code for _ in range(7)]
    assert statuses[:5] == [200] * 5 and statuses[5:] == [429, 429]
    assert b"your answers so far are saved" in client.get(f"/s/{study.slug}/step/").content.lower()


def test_a_form_bot_filling_the_honeypot_gets_nothing_stored(client, study):
    enter(client, study, "bot000001")
    consent = client.get(f"/s/{study.slug}/step/").content.decode()
    assert f'name="{HONEYPOT_FIELD}"' in consent
    assert (
        post_step(client, study, {"step": "consent", "decision": "agree", HONEYPOT_FIELD: "x"}).status_code
        == 400
    )
    assert Participant.objects.get(external_id="bot000001").step == "consent"
    participant, fields = to_first_item(client, study, "bot000001")
    item = client.get(f"/s/{study.slug}/step/").content.decode()
    assert f'name="{HONEYPOT_FIELD}"' in item
    response = post_step(client, study, {**fields, "value": "3", HONEYPOT_FIELD: "http://spam.example"})
    assert response.status_code == 400
    assert Rating.objects.count() == 0
    assert post_step(client, study, {**fields, "value": "3", HONEYPOT_FIELD: ""}).status_code == 302
    assert Rating.objects.count() == 1


def test_participants_keep_rating_when_redis_stops(client, study, settings, throwaway_redis):
    server, url = throwaway_redis
    settings.REDIS_URL = url  # the rate limiter's store
    settings.CACHES = {  # the sessions' cache
        **settings.CACHES,
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        },
    }
    participant, fields = to_first_item(client, study, "redis0001")
    server.kill()
    server.wait()
    for _ in range(study.items_per_participant):
        fields = hidden_fields(client.get(f"/s/{study.slug}/step/").content.decode())
        assert post_step(client, study, {**fields, "value": "2"}).status_code == 302
    participant.refresh_from_db()
    assert participant.status == "completed"
    assert Rating.objects.filter(assignment__participant=participant).count() == study.items_per_participant
    # A newcomer can still enter while Redis is down.
    assert enter(Client(), study, "redis0002").status_code == 200


# --- who can reach what -----------------------------------------------------------------------------


def test_participants_cannot_reach_the_admin_the_analysis_or_the_api(client, study):
    to_first_item(client, study, "curious01")
    for url in ("/admin/", "/admin/studies/participant/", "/analysis/", "/api/", "/api/schema/?format=json"):
        response = client.get(url)
        if url.startswith("/api/schema"):
            continue  # the schema describes the API; reading it needs no account, using the API does
        assert response.status_code in (302, 401, 403, 404), (url, response.status_code)
        if response.status_code == 302:
            assert "/login" in response["Location"], url


def test_a_participant_never_sees_another_participants_external_id(study):
    first, second = Client(), Client()
    _, fields = to_first_item(first, study, "5f1a2b3c4d5e6f7a8b9c0d1e")
    to_first_item(second, study, "aaaabbbbccccddddeeeeffff")
    pages = []
    for _ in range(study.items_per_participant):
        page = first.get(f"/s/{study.slug}/step/").content.decode()
        pages.append(page)
        fields = hidden_fields(page)
        post_step(first, study, {**fields, "value": "3"})
    pages.append(first.get(f"/s/{study.slug}/step/").content.decode())
    assert "Thank you" in pages[-1]
    assert not any("aaaabbbbccccddddeeeeffff" in page for page in pages)


# --- error pages -------------------------------------------------------------------------------------------


def test_a_missing_page_tells_participants_how_to_get_back(client):
    response = client.get("/s/no-such-study/step/")
    assert response.status_code == 404
    assert "open the study link again" in response.content.decode()


@pytest.mark.urls("tests.ops.urls")
def test_a_server_error_shows_a_page_that_says_the_answers_are_saved(client):
    client.raise_request_exception = False
    response = client.get("/boom/")
    assert response.status_code == 500
    assert "Your answers so far are saved" in response.content.decode()
