"""What one participant request costs in round trips: one to Redis (the rate limiter's pipeline; for a browser
that enrolled before tickets it also fetches the session, config/ratelimit.py and config/sessions.py) and, for
an in-place answer, at most four SQL statements (the participant, the participant's row locked — one statement
where the view finds and locks them together, `rating_submit_for` — their items, the rating written with its
item's times) — with the same answers stored as before."""

import pytest
from django.conf import settings
from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext
from redis.connection import AbstractConnection

from config.sessions import SessionStore
from ratings.selectors import session_key
from studies.models import Assignment, Participant, Rating
from tests.factories import rating_study_build
from tests.ratings.helpers import consent_and_instructions, current_position, enter, step_url

JSON = {"HTTP_ACCEPT": "application/json"}
_HANDSHAKE = (b"HELLO", b"CLIENT", b"\r\nSELECT\r\n")


@pytest.fixture
def study():
    return rating_study_build(conditions=1, prompts=6, items_per_participant=3)


@pytest.fixture
def redis_trips(settings, redis_url, monkeypatch):
    """Rate limits on (high), sessions in Redis; returns a list that grows by one per round trip to Redis."""
    settings.RATELIMIT_ENABLED = True
    settings.RATELIMIT_PARTICIPANT = 1000
    settings.RATELIMIT_ENTRY_PER_IP = 1000
    caches["default"].clear()
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
def test_a_session_cache_on_another_redis_is_read_by_the_store_itself(client, study, redis_trips, settings):
    position = _ready(client, study, ticket=False)
    settings.REDIS_URL = settings.REDIS_URL.rsplit("/", 1)[0] + "/14"  # the limiter on another database
    redis_trips.clear()
    assert current_position(client, study) == position
    assert len(redis_trips) == 2  # the limiter's pipeline there, the session read from the cache here


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("answer_path", "ticket"), [(True, True), (True, False), (False, True)], ids=["ticket", "session", "view"]
)
def test_an_in_place_answer_is_one_statement_or_at_most_four_and_with_its_ticket_no_redis_round_trip(
    client, study, redis_trips, requires_postgres, settings, answer_path, ticket
):
    """On its own path (ratings/answer_path.py) the answer is one statement, `rating_answer_in_place`;
    through the view (PARTICIPANT_ANSWER_PATH off), at most four. The same rows either way. With the
    participant's ticket (ratings/tickets.py), the answer's own path makes no round trip to Redis: the
    statement counts its rate limit. Without it, or through the view, one (the limiter's, with the session)."""
    settings.PARTICIPANT_ANSWER_PATH = answer_path
    position = _ready(client, study, ticket=ticket)
    assert (settings.PARTICIPANT_TICKET_COOKIE_NAME in client.cookies) is ticket  # set at the entry
    redis_trips.clear()
    with CaptureQueriesContext(connection) as queries:
        response = client.post(step_url(study), {"step": "items", "position": position, "value": 2}, **JSON)
    assert response.status_code == 200 and response.json()["saved"] is True
    # The test's own transaction turns the answer's into a savepoint: not a statement of the answer's.
    statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    if answer_path:
        assert len(statements) == 1 and "rating_answer_in_place(" in statements[0], statements
    else:
        found_and_locked = "FOR UPDATE" in statements[0]  # one query, or a look-up and then the lock
        assert len(statements) == (3 if found_and_locked else 4), statements
        assert "FOR UPDATE" in statements[0 if found_and_locked else 1]
        assert statements[-1].startswith("WITH") and "UPDATE" in statements[-1] and "INSERT" in statements[-1]
    assert len(redis_trips) == (0 if answer_path and ticket else 1)
    # What the one statement wrote: the rating, its item's times, and the next item marked as shown.
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


@pytest.mark.django_db
def test_consent_and_instructions_with_the_ticket_are_one_statement_each_and_no_round_trip_to_redis(
    client, study, redis_trips, requires_postgres
):
    """Each is a step left once per participant: moved on by its one statement and not counted by the limiter.
    A repeat (a second tab, a double click) is counted and answered by the usual path, nothing stored again."""
    enter(client, study, "PID1")
    redis_trips.clear()
    for fields, statement in (
        ({"step": "consent", "decision": "agree"}, "UPDATE"),
        ({"step": "instructions"}, "rating_items_begin_in_place("),
    ):
        with CaptureQueriesContext(connection) as queries:
            reply = client.post(step_url(study), fields, **JSON)
        assert reply.status_code == 200, reply.content
        statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
        assert len(statements) == 1 and statement in statements[0], statements
    assert redis_trips == []
    participant = Participant.objects.get()
    assert participant.step == Participant.Step.ITEMS
    again = client.post(step_url(study), {"step": "consent", "decision": "agree"}, **JSON)
    assert again.json() == {"next": step_url(study)}  # nothing stored: the step page says where they are
    assert len(redis_trips) == 1  # counted by the limiter
    participant.refresh_from_db()
    assert participant.step == Participant.Step.ITEMS
