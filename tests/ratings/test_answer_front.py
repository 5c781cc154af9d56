"""The answer front (ratings/answer_path.py `AnswerFront`, the WSGI application gunicorn serves): in-place
answers taken before Django's request handling, with the headers and access log Django's would have, and
everything else — or anything that goes wrong — handed to Django as it came."""

import contextlib
import json
import logging
from urllib.parse import urlencode

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import OperationalError, close_old_connections, connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from ratings import answer_path
from studies.models import Participant, Rating
from tests.factories import AttentionCheckFactory, rating_study_build
from tests.ratings.helpers import (
    CSRF_TOKEN,
    POSITION,
    enter,
    first_item,
    item_positions,
    step_url,
)

pytestmark = pytest.mark.postgres
FUNCTION = "rating_answer_in_place("


@pytest.fixture
def study():
    study = rating_study_build(conditions=1, prompts=8, items_per_participant=4)
    AttentionCheckFactory(study=study, after_item=1, expected_value=2, emotion_label="attention check")
    return study


@pytest.fixture
def participant(client, study, requires_postgres):
    remember_token(client, first_item(client, study))
    return Participant.objects.get(external_id="PID1")


def on_items(*, items: int):
    """A study, a browser whose participant is on its first item (token remembered), and that item."""
    from django.test import Client

    study = rating_study_build(conditions=1, prompts=6, items_per_participant=items)
    client = Client()
    page = first_item(client, study)
    remember_token(client, page)
    return study, client, int(POSITION.search(page)[1])


def remember_token(client, page: str) -> None:
    """The item page's CSRF token, kept on the client for `call` (the script sends the page's token)."""
    client.csrf_token = CSRF_TOKEN.search(page)[1]


@pytest.fixture
def front():
    return answer_path.AnswerFront(WSGIHandler())


@contextlib.contextmanager
def _connection_kept():
    """As Django's test client does: the request signals must not close the test's connection."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def call(front, client, path, data=None, *, accept="application/json", host="testserver", kept=True):
    """The request a browser's script sends, through the front, as gunicorn calls it: (status, headers,
    body)."""
    cookie = "; ".join(f"{name}={morsel.value}" for name, morsel in client.cookies.items())
    if data is not None:  # the page's CSRF token, as the script sends it (the front checks it)
        data = {"csrfmiddlewaretoken": client.csrf_token, **data}
    factory = RequestFactory()
    if data is None:
        environ = factory.get(path, HTTP_COOKIE=cookie, HTTP_ACCEPT=accept, HTTP_HOST=host).environ
    else:
        environ = factory.post(
            path,
            urlencode(data),
            content_type="application/x-www-form-urlencoded",
            HTTP_COOKIE=cookie,
            HTTP_ACCEPT=accept,
            HTTP_HOST=host,
        ).environ
    seen = {}

    def start_response(status, headers):
        seen["status"], seen["headers"] = int(status.split()[0]), headers

    with _connection_kept() if kept else contextlib.nullcontext():
        response = front(environ, start_response)
        body = b"".join(response)
        response.close()
    return seen["status"], dict(seen["headers"]), body


def answer(front, client, study, position, value, **extra):
    data = {"step": "items", "position": position, "value": value, **extra}
    return call(front, client, step_url(study), data)


@pytest.mark.django_db
def test_an_answer_is_taken_before_django_with_djangos_headers_and_access_log(
    client, study, participant, front, caplog
):
    first, check, *rest = item_positions(participant)
    with CaptureQueriesContext(connection) as queries, caplog.at_level(logging.INFO, logger="access"):
        status, headers, body = answer(front, client, study, first, 3)
    assert status == 200 and b'"saved": true' in body
    assert [q["sql"] for q in queries.captured_queries if FUNCTION not in q["sql"]] == [
        q["sql"]
        for q in queries.captured_queries
        if "studies_emotion" in q["sql"]  # the check's disguise
    ]
    assert [r.getMessage() for r in caplog.records if r.name == "access"] == [f"POST {step_url(study)} 200"]
    # The same headers as an answer through Django's whole handler (the next one, taken by the view).
    through_django = client.post(
        step_url(study), {"step": "items", "position": check, "value": 2}, HTTP_ACCEPT="application/json"
    )
    assert through_django.json()["saved"] is True
    assert set(headers) == set(through_django.headers)
    assert headers["X-Frame-Options"] == "DENY" and "no-store" in headers["Cache-Control"]
    assert headers["Content-Security-Policy"] and headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.django_db
def test_an_answer_the_path_leaves_reaches_django_with_its_body_tried_once_and_counted_once(
    client, study, participant, front, settings, redis_url
):
    settings.RATELIMIT_ENABLED = True
    settings.RATELIMIT_PARTICIPANT = 1
    from django.core.cache import caches

    caches["default"].clear()
    first, check, *rest = item_positions(participant)
    assert answer(front, client, study, first, 3)[0] == 200  # stored: not counted
    with CaptureQueriesContext(connection) as queries:
        status, _headers, body = answer(front, client, study, check, 3)  # an attention check: the view's
    assert status == 200 and b'"saved": true' in body  # counted by the limiter (Redis), not on the row too
    assert (
        sum(FUNCTION in q["sql"] for q in queries.captured_queries) == 1
    )  # not tried again by the middleware
    assert Participant.objects.get(pk=participant.pk).attention_failures == 1
    assert answer(front, client, study, first, 3)[0] == 200  # a repeat, counted on the row: 1
    assert answer(front, client, study, first, 3)[0] == 429  # 2 > 1
    assert Rating.objects.count() == 2


@pytest.mark.django_db
def test_consent_posted_in_the_background_is_taken_before_django_with_djangos_headers_and_access_log(
    client, study, front, requires_postgres, caplog
):
    remember_token(client, enter(client, study, "PID2").content.decode())  # on the consent page
    handled = []
    django_app = front.django_app
    front.django_app = lambda environ, start_response: (
        handled.append(environ) or django_app(environ, start_response)
    )
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="access"):
        status, headers, body = call(front, client, step_url(study), {"step": "consent", "decision": "agree"})
    assert status == 200 and "Instructions" in json.loads(body)["page"]
    assert handled == []  # not Django's handler
    assert Participant.objects.get(external_id="PID2").step == Participant.Step.INSTRUCTIONS
    assert [r.getMessage() for r in caplog.records if r.name == "access"] == [f"POST {step_url(study)} 200"]
    # The same headers as the next step's post through Django's whole handler.
    through_django = client.post(step_url(study), {"step": "instructions"}, HTTP_ACCEPT="application/json")
    assert 'name="position"' in through_django.json()["page"]
    assert set(headers) - {"Set-Cookie"} == set(through_django.headers)  # the client keeps cookies apart
    assert headers["Set-Cookie"].strip().split("=")[0] == "csrftoken" and set(through_django.cookies) == {
        "csrftoken"
    }
    assert headers["X-Frame-Options"] == "DENY" and "no-store" in headers["Cache-Control"]
    assert headers["Vary"] == through_django.headers["Vary"]


@pytest.mark.django_db
def test_a_step_the_path_does_not_take_goes_straight_to_django_and_its_middleware_runs_once(
    client, front, requires_postgres, caplog
):
    study = rating_study_build(conditions=1, prompts=4, items_per_participant=2, ask_teq=True)
    enter(client, study, "PID3")
    client.post(step_url(study), {"step": "consent", "decision": "agree"})
    page = client.post(step_url(study), {"step": "instructions"}, follow=True).content.decode()
    remember_token(client, page)  # on the TEQ page
    chains, chain = [], front.chain
    front.chain = lambda request: chains.append(request) or chain(request)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="access"):
        status, _headers, body = call(front, client, step_url(study), {"step": "teq", "q1": "often"})
    assert status == 400 and "<h1>About you</h1>" in json.loads(body)["page"]  # the TEQ, answers missing
    assert chains == []  # not through the front's middleware and path first
    assert [r.getMessage() for r in caplog.records if r.name == "access"] == [f"POST {step_url(study)} 400"]


@pytest.mark.django_db
def test_other_requests_go_to_django(client, study, participant, front):
    status, headers, body = call(front, client, step_url(study), accept="text/html")
    assert status == 200 and b'name="position"' in body and headers["Content-Type"].startswith("text/html")
    first = item_positions(participant)[0]
    plain = call(
        front, client, step_url(study), {"step": "items", "position": first, "value": 3}, accept="*/*"
    )
    assert plain[0] == 302  # a form post without JavaScript: the view's redirect
    assert (
        call(
            front, client, step_url(study), {"step": "items", "position": 1, "value": 3}, host="evil.example"
        )[0]
        == 400
    )  # a host not allowed: Django's answer


@pytest.mark.django_db(transaction=True)
def test_a_failure_on_the_path_hands_the_answer_to_django(requires_postgres, monkeypatch, caplog):
    study, client, position = on_items(items=3)

    def broken(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(answer_path, "answer_in_place", broken)
    front = answer_path.AnswerFront(WSGIHandler())
    status, _headers, body = answer(front, client, study, position, 2)
    assert status == 200 and b'"saved": true' in body  # stored by the view
    assert [r.value for r in Rating.objects.all()] == [2]
    assert "the answer path failed" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_the_same_answer_through_the_front_from_twenty_threads_is_stored_once(
    requires_postgres, answers_taken
):
    from tests.studies.test_assignment_races import race

    study, client, position = on_items(items=4)
    front = answer_path.AnswerFront(WSGIHandler())

    def post(i):
        status, _headers, body = call(
            front,
            client,
            step_url(study),
            {"step": "items", "position": position, "value": 1 + i % 3},
            kept=False,
        )
        return status, json.loads(body)["item"]["position"]

    replies, errors = race(post, 20)

    assert not errors and {status for status, _ in replies.values()} == {200}
    assert answers_taken == [True] * 20  # all taken by the front, none handed to Django
    assert len({shown for _, shown in replies.values()}) == 1  # every attempt got the same next item
    assert Rating.objects.filter(assignment__position=position).count() == 1 and Rating.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_answer_on_a_connection_the_server_closed_is_stored_through_django(requires_postgres, caplog):
    """PostgreSQL restarted, or the connection dropped, since the worker's last request: the front skips the
    health check, its statement fails, and Django replaces the connection and stores the answer."""
    import psycopg2

    study, client, position = on_items(items=3)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    settings_dict = connection.settings_dict
    other = psycopg2.connect(
        dbname=settings_dict["NAME"],
        user=settings_dict["USER"],
        host=settings_dict["HOST"],
        port=settings_dict["PORT"],
    )
    other.autocommit = True
    with other.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [backend])
    other.close()

    front = answer_path.AnswerFront(WSGIHandler())
    status, _headers, body = answer(front, client, study, position, 2)

    assert status == 200 and b'"saved": true' in body
    assert [r.value for r in Rating.objects.all()] == [2]
    assert "the answer path failed" in caplog.text


@pytest.mark.django_db
def test_a_plain_http_answer_under_the_https_redirect_is_redirected_and_not_stored(
    client, study, participant, settings
):
    settings.SECURE_SSL_REDIRECT = True  # read by SecurityMiddleware when the front is built, as at start-up
    front = answer_path.AnswerFront(WSGIHandler())
    status, headers, _body = answer(front, client, study, item_positions(participant)[0], 3)
    assert status == 301 and headers["Location"].startswith("https://")
    assert not Rating.objects.exists()
