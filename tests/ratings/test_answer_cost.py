"""What one participant request costs in round trips: one to Redis (the rate limiter's pipeline; for a browser
that enrolled before tickets it also fetches the session, config/ratelimit.py and config/sessions.py) and, for
an in-place answer, four SQL statements (the participant, the participant's row locked, their items, the rating
written with its item's times and the next item marked as shown) — with the answer stored as the plain post
stores it."""

import pytest
from django.conf import settings
from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext
from redis.connection import AbstractConnection

from config.sessions import SessionStore
from kinds.rating.models import Rating
from ratings.selectors import session_key
from studies.models import Assignment, Participant
from tests.factories import rating_study_build
from tests.ratelimits import rate_limits_on
from tests.ratings.helpers import consent_and_instructions, current_position, enter, step_url

JSON = {"HTTP_ACCEPT": "application/json"}
_HANDSHAKE = (b"HELLO", b"CLIENT", b"\r\nSELECT\r\n")


@pytest.fixture
def study():
    return rating_study_build(conditions=1, prompts=6, items_per_participant=3)


@pytest.fixture
def redis_trips(settings, redis_url, monkeypatch):
    """Rate limits on (high), sessions in Redis; returns a list that grows by one per round trip to Redis."""
    rate_limits_on(settings)
    sent = []
    send = AbstractConnection.send_packed_command

    def counted(self, command, check_health=True):
        if not any(word in b"".join(command) for word in _HANDSHAKE):  # a new connection's set-up
            sent.append(command)
        return send(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    return sent


def _ready(client, study, *, ticket: bool = True):
    """PID1 on their first item; `ticket=False`: a browser that enrolled before tickets (ratings/tickets.py),
    whose session names the participant."""
    enter(client, study, "PID1")
    if not ticket:
        session = client.session  # a new one, its cookie set on the client
        session[session_key(study.slug)] = Participant.objects.get(external_id="PID1").pk
        session.save()
        del client.cookies[settings.PARTICIPANT_TICKET_COOKIE_NAME]
    consent_and_instructions(client, study)
    return current_position(client, study)


@pytest.mark.django_db
@pytest.mark.parametrize("ticket", [True, False], ids=["ticket", "session"])
def test_a_participant_page_makes_one_round_trip_the_rate_limiters(client, study, redis_trips, ticket):
    """With the ticket the browser has no session to read; without it, the limiter's pipeline reads it."""
    _ready(client, study, ticket=ticket)
    assert (settings.SESSION_COOKIE_NAME in client.cookies) is not ticket
    if not ticket:
        assert isinstance(client.session, SessionStore)  # the Redis-backed store these settings use
    redis_trips.clear()
    response = client.get(step_url(study))
    assert response.status_code == 200 and 'name="position"' in response.content.decode()  # their item
    assert len(redis_trips) == 1


@pytest.mark.django_db
def test_a_session_missing_from_redis_is_read_from_the_database_and_put_back(client, study, redis_trips):
    position = _ready(client, study, ticket=False)
    session = client.session
    caches["default"].delete(session.cache_key)
    assert current_position(client, study) == position  # still their page: the database is the record
    assert caches["default"].get(session.cache_key) is not None


@pytest.mark.django_db
def test_a_session_cache_on_another_redis_is_read_by_the_store_itself(
    client, study, redis_trips, settings, throwaway_redis
):
    position = _ready(client, study, ticket=False)
    settings.REDIS_URL = throwaway_redis[1]  # the limiter on another Redis
    redis_trips.clear()
    assert current_position(client, study) == position
    assert len(redis_trips) == 2  # the limiter's pipeline there, the session read from the cache here


@pytest.mark.django_db
@pytest.mark.parametrize("ticket", [True, False], ids=["ticket", "session"])
def test_an_in_place_answer_is_four_statements_and_one_round_trip_to_redis(
    client, study, redis_trips, requires_postgres, ticket
):
    """The participant, their row locked, their items, then the rating with its item's times in one statement;
    one round trip to Redis (the limiter's, which fetches the session too for a browser without a ticket)."""
    position = _ready(client, study, ticket=ticket)
    assert (settings.PARTICIPANT_TICKET_COOKIE_NAME in client.cookies) is ticket  # set at the entry
    redis_trips.clear()
    with CaptureQueriesContext(connection) as queries:
        response = client.post(step_url(study), {"step": "items", "position": position, "value": 2}, **JSON)
    assert response.status_code == 200 and response.json()["saved"] is True
    # The test's own transaction turns the answer's into a savepoint: not a statement of the answer's.
    statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert len(statements) == 4, statements
    assert "FOR UPDATE" in statements[1]
    assert statements[-1].startswith("WITH") and "UPDATE" in statements[-1] and "INSERT" in statements[-1]
    assert len(redis_trips) == 1
    # What the answer wrote: the rating, its item's times, and the next item marked as shown.
    participant = Participant.objects.get(external_id="PID1")
    answered = Assignment.objects.get(participant=participant, position=position)
    rating = Rating.objects.get(assignment=answered)
    assert rating.value == 2 and answered.answered_at == rating.created_at
    assert answered.shown_at is not None and answered.shown_at <= answered.answered_at
    shown = Assignment.objects.get(participant=participant, position=response.json()["item"]["position"])
    assert shown.shown_at == rating.created_at and shown.answered_at is None
    others = Assignment.objects.filter(participant=participant).exclude(pk__in=[answered.pk, shown.pk])
    assert [a.shown_at for a in others] == [None]


@pytest.mark.django_db
def test_a_new_session_key_already_taken_is_drawn_again_and_the_other_session_is_untouched(
    redis_trips, monkeypatch
):
    """New keys are not looked up first (config/sessions.py): the INSERT refuses a taken one instead."""
    taken = SessionStore()
    taken["who"] = "first"
    taken.save()
    keys = iter([taken.session_key, "k" * 32])
    monkeypatch.setattr("config.sessions.get_random_string", lambda length, chars: next(keys))
    redis_trips.clear()
    fresh = SessionStore()
    fresh["who"] = "second"
    fresh.save()
    assert fresh.session_key == "k" * 32
    assert not [command for command in redis_trips if b"GET" in command[0][:40]]  # no look-up first
    assert SessionStore(taken.session_key).load() == {"who": "first"}


@pytest.mark.django_db(transaction=True)
def test_a_session_is_written_by_one_statement_outside_a_transaction_and_a_taken_key_is_drawn_again(
    redis_trips, monkeypatch
):
    """Outside a transaction (a request's session save) the row's INSERT or UPDATE is the only statement,
    committed by itself: no transaction (BEGIN and COMMIT) around it. A refused INSERT (a taken key) changes
    nothing and a new key is drawn."""
    statements = []

    def record(execute, sql, params, many, context):
        statements.append((sql.split()[0], connection.in_atomic_block))
        return execute(sql, params, many, context)

    taken = SessionStore()
    taken["who"] = "first"
    redis_trips.clear()
    with connection.execute_wrapper(record):
        taken.save()
    assert statements == [("INSERT", False)]
    assert len(redis_trips) == 1  # the cached copy, written once
    keys = iter([taken.session_key, "k" * 32])
    monkeypatch.setattr("config.sessions.get_random_string", lambda length, chars: next(keys))
    fresh = SessionStore()
    fresh["who"] = "second"
    fresh.save()
    assert fresh.session_key == "k" * 32
    fresh["who"] = "second, changed"
    statements.clear()
    redis_trips.clear()
    with connection.execute_wrapper(record):
        fresh.save()
    assert statements == [("UPDATE", False)]
    assert len(redis_trips) == 1
    caches["default"].clear()  # both read back from the database
    assert SessionStore(taken.session_key).load() == {"who": "first"}
    assert SessionStore("k" * 32).load() == {"who": "second, changed"}
