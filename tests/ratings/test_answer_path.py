"""The in-place answer's own path (ratings/answer_path.py, `rating_answer_in_place` on PostgreSQL) against the
view's: the same replies and the same rows for every kind of answer, one statement for those it takes,
nothing written for those it leaves to the view, exactly once under a race, the rate limit counted once."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ratings.answer_path import InPlaceAnswerMiddleware
from studies.models import Assignment, Participant, Rating
from tests.factories import AttentionCheckFactory, rating_study_build
from tests.ratings.helpers import (
    CSRF_TOKEN,
    POSITION,
    enter,
    first_item,
    item_positions,
    step_url,
)
from tests.studies.test_assignment_races import race

pytestmark = pytest.mark.postgres
JSON = {"HTTP_ACCEPT": "application/json"}
FUNCTION = "rating_answer_in_place("


@pytest.fixture
def study():
    study = rating_study_build(
        conditions=1,
        prompts=8,
        items_per_participant=4,
        failed_checks_code="CHECKS",
        attention_check_max_failures=0,
    )
    AttentionCheckFactory(study=study, after_item=1, expected_value=2, emotion_label="attention check")
    return study


@pytest.fixture
def participant(client, study, requires_postgres):
    first_item(client, study)
    return Participant.objects.get(external_id="PID1")


def post(client, study, position, value, **extra):
    data = {"step": "items", "position": position, "value": value, **extra}
    return client.post(step_url(study), data, **JSON)


def _rows(participant: Participant) -> dict:
    """What an answer can change, timestamps as set or not (the two paths run a few ms apart)."""
    fresh = Participant.objects.get(pk=participant.pk)
    return {
        "participant": (
            fresh.status,
            fresh.step,
            fresh.attention_failures,
            fresh.flagged_for_exclusion,
            fresh.exclusion_reasons,
            fresh.completion_code,
            fresh.last_seen_at > timezone.now() - timedelta(seconds=10),  # touched by this answer
        ),
        "assignments": [
            (a.position, a.shown_at is not None, a.answered_at is not None)
            for a in Assignment.objects.filter(participant=participant).order_by("position")
        ],
        "ratings": [
            (r.assignment.position, r.value, r.response_time_ms and round(r.response_time_ms / 1000))
            for r in Rating.objects.filter(assignment__participant=participant).order_by(
                "assignment__position"
            )
        ],
    }


def _reply(response) -> tuple:
    data = response.json()
    if "page" in data:  # the completion page, not its CSRF token
        data = {"url": data["url"], "finished": "Thank you, you have finished" in data["page"]}
    return response.status_code, data


def both_paths(client, study, participant, settings, position, value, **extra) -> dict:
    """The same post, on the same rows, through the answer path and through the view (each rolled back)."""
    seen = {}
    for path in (True, False):
        settings.PARTICIPANT_ANSWER_PATH = path
        savepoint = transaction.savepoint()
        with CaptureQueriesContext(connection) as queries:
            response = post(client, study, position, value, **extra)
        statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
        seen[path] = {"reply": _reply(response), "rows": _rows(participant), "statements": statements}
        transaction.savepoint_rollback(savepoint)
    settings.PARTICIPANT_ANSWER_PATH = True
    assert seen[True]["reply"] == seen[False]["reply"]
    assert seen[True]["rows"] == seen[False]["rows"]
    assert not any(FUNCTION in sql for sql in seen[False]["statements"])
    return seen[True]


@pytest.mark.django_db
def test_every_kind_of_answer_gets_the_same_reply_and_rows_on_both_paths(
    client, study, participant, settings
):
    first, check, *rest = item_positions(participant)
    # Shown a while ago (both paths count the response time from there), seen 30 s ago (both touch them).
    Assignment.objects.filter(participant=participant).update(shown_at=timezone.now() - timedelta(seconds=5))
    Participant.objects.filter(pk=participant.pk).update(last_seen_at=timezone.now() - timedelta(seconds=30))

    taken = both_paths(client, study, participant, settings, first, 3)  # the first answer: stored
    # One statement; the attention check shown next is disguised with the study's emotions (one read more).
    assert FUNCTION in taken["statements"][0]
    assert [sql for sql in taken["statements"][1:] if "studies_emotion" not in sql] == []
    assert taken["reply"][1]["saved"] is True and taken["reply"][1]["item"]["position"] == check
    # Shown next is the attention check, disguised with one of the study's emotions on both paths.
    assert taken["reply"][1]["item"]["emotion"] != "attention check"
    assert post(client, study, first, 3).json()["saved"] is True  # now for real

    # An attention check's answer (failed) counts failures: left to the view, nothing written by the function.
    left = both_paths(client, study, participant, settings, check, 3)
    assert FUNCTION in left["statements"][0] and len(left["statements"]) > 1
    assert left["rows"]["participant"][2] == 1  # attention_failures
    assert post(client, study, check, 3).json()["saved"] is True

    current = rest[0]
    for name, (position, value) in {
        "repeat": (first, 1),  # already answered: the stored answer stands, the current item comes back
        "stale": (rest[1], 3),  # not the current item: nothing stored
        "off the scale": (current, 99),
        "not theirs": (9999, 3),
    }.items():
        seen = both_paths(client, study, participant, settings, position, value)
        assert len(seen["statements"]) == 1 and FUNCTION in seen["statements"][0], name
    assert both_paths(client, study, participant, settings, 9999, 3)["reply"][0] == 403
    assert both_paths(client, study, participant, settings, current, 99)["reply"][0] == 400
    stale = both_paths(client, study, participant, settings, rest[1], 3)["reply"][1]
    assert stale["saved"] is False and stale["item"]["position"] == current

    for position in rest[:-1]:
        assert post(client, study, position, 2).json()["saved"] is True
    # The last answer completes the participant (with the failed-checks code: one check failed) and brings
    # the completion page: the statement, then the participant and study read for the page.
    last = both_paths(client, study, participant, settings, rest[-1], 1)
    assert last["reply"][1] == {"url": step_url(study), "finished": True}
    assert last["rows"]["participant"][0] == Participant.Status.COMPLETED
    assert last["rows"]["participant"][5] == study.failed_checks_code != study.completion_code
    assert FUNCTION in last["statements"][0] and len(last["statements"]) == 2


@pytest.mark.django_db
def test_a_participant_past_the_time_limit_is_left_to_the_view(client, study, participant, settings):
    first = item_positions(participant)[0]
    Participant.objects.filter(pk=participant.pk).update(last_seen_at=timezone.now() - timedelta(days=1))
    seen = both_paths(client, study, participant, settings, first, 3)
    assert FUNCTION in seen["statements"][0]
    assert seen["rows"]["participant"][0] == Participant.Status.TIMED_OUT and not seen["rows"]["ratings"]


@pytest.mark.django_db
def test_what_the_path_does_not_recognise_goes_to_the_view(client, study, participant, settings):
    first = item_positions(participant)[0]
    for extra in ({"contact_me_by_fax_only": "spam"}, {"value": "x"}):
        with CaptureQueriesContext(connection) as queries:
            response = post(client, study, first, **{"value": 3, **extra})
        assert response.status_code == 400 and not any(FUNCTION in q["sql"] for q in queries.captured_queries)
    stranger = Client()
    assert post(stranger, study, first, 3).json() == {"next": f"/s/{study.slug}/"}
    assert not Rating.objects.exists()


@pytest.mark.django_db
def test_the_reply_has_the_views_headers(client, study, participant):
    response = post(client, study, item_positions(participant)[0], 3)
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert "no-store" in response["Cache-Control"] and response["X-Frame-Options"] == "DENY"
    assert "Cookie" in response["Vary"] and response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] and response["X-Request-ID"]


@pytest.mark.django_db
def test_the_rate_limit_counts_each_request_that_stores_nothing_once_on_either_path(
    client, study, participant, settings, redis_url
):
    """The statement counts what it answers without storing (a repeat) on the participant's row; what it hands
    to the view (an attention check's answer) is counted by the limiter there, not on the row as well; an answer
    that stores a rating is counted by neither (tests/ratings/test_tickets.py), yet refused once the row is full."""
    settings.RATELIMIT_ENABLED = True
    settings.RATELIMIT_PARTICIPANT = 2
    from django.core.cache import caches

    caches["default"].clear()
    first, check, *rest = item_positions(participant)

    def counted():
        return Participant.objects.get(pk=participant.pk).requests_in_window

    assert post(client, study, first, 3).json()["saved"] is True  # the answer path
    assert post(client, study, first, 3).status_code == 200 and counted() == 1  # a repeat
    assert post(client, study, check, 2).status_code == 200  # an attention check: the view
    assert counted() == 1 and Rating.objects.count() == 2
    assert post(client, study, first, 3).status_code == 200 and counted() == 2
    refused = post(client, study, rest[0], 2)
    assert refused.status_code == 429 and refused["Retry-After"]
    assert Rating.objects.count() == 2 and counted() == 3


@pytest.mark.django_db(transaction=True)
def test_concurrent_answers_of_one_participant_are_stored_exactly_once(requires_postgres, answers_taken):
    """30 tabs post at once: half the current item (with two different values), half the item after it."""
    study = rating_study_build(conditions=1, prompts=6, items_per_participant=4)
    browser = Client()
    current = int(POSITION.search(first_item(browser, study))[1])
    participant = Participant.objects.get()
    after = [p for p in item_positions(participant) if p > current][0]

    def tab(i):
        other = Client()
        other.cookies = browser.cookies
        response = post(other, study, current if i % 2 else after, 3 if i % 4 == 1 else 1)
        return response.json()["item"]["position"]

    shown, errors = race(tab, 30)

    assert not errors
    assert answers_taken == [True] * 30  # every attempt answered by the one statement
    # The current item is stored once. A post of the item after it stores nothing while that item is not
    # yet current (it gets the current one back), and may store it once it is — never before, never twice.
    stored = {r.assignment.position: r for r in Rating.objects.filter(assignment__participant=participant)}
    assert set(stored) <= {current, after} and current in stored
    if after in stored:  # stored after the current item's, under the participant's lock (ids in order)
        assert stored[after].pk > stored[current].pk
    assert all(position != current for i, position in shown.items() if i % 2)


def _step_reply(response) -> tuple:
    data = response.json()
    if "page" in data:  # the CSRF token is masked anew for every page
        data = {**data, "page": CSRF_TOKEN.sub("", data["page"])}
    return response.status_code, data


def both_paths_step(client, study, participant, settings, monkeypatch, data) -> dict:
    """A step's form posted in the background, on the same rows, through the path and through the view (each
    rolled back); the path must have taken it."""
    seen, taken = {}, []
    answer = InPlaceAnswerMiddleware.answer

    def answered(self, request, slug):
        response = answer(self, request, slug)
        if response is not None:
            taken.append(slug)
        return response

    monkeypatch.setattr(InPlaceAnswerMiddleware, "answer", answered)
    for path in (True, False):
        settings.PARTICIPANT_ANSWER_PATH = path
        taken.clear()
        savepoint = transaction.savepoint()
        response = client.post(step_url(study), data, **JSON)
        seen[path] = {"reply": _step_reply(response), "rows": _rows(participant), "taken": list(taken)}
        transaction.savepoint_rollback(savepoint)
    settings.PARTICIPANT_ANSWER_PATH = True
    assert seen[True]["taken"] == [study.slug] and seen[False]["taken"] == []
    assert seen[True]["reply"] == seen[False]["reply"]
    assert seen[True]["rows"] == seen[False]["rows"]
    return seen[True]


@pytest.mark.django_db
def test_consent_and_instructions_posted_in_the_background_get_the_same_reply_and_rows_on_both_paths(
    client, study, settings, monkeypatch, requires_postgres
):
    enter(client, study, "PID2")
    participant = Participant.objects.get(external_id="PID2")
    Participant.objects.filter(pk=participant.pk).update(last_seen_at=timezone.now() - timedelta(seconds=30))

    def both(data):
        return both_paths_step(client, study, participant, settings, monkeypatch, data)

    declined = both({"step": "consent", "decision": "decline"})
    assert declined["rows"]["participant"][:2] == (Participant.Status.SCREENED_OUT, Participant.Step.DONE)
    assert declined["rows"]["assignments"] == []  # the items given back
    malformed = both({"step": "consent", "decision": "perhaps"})
    assert malformed["reply"][0] == 400 and malformed["rows"]["participant"][1] == Participant.Step.CONSENT
    stale = both({"step": "instructions"})  # a page from a later step: nothing stored
    assert stale["reply"] == (200, {"next": step_url(study)}) and stale["rows"]["participant"][-1] is True
    agreed = both({"step": "consent", "decision": "agree"})
    assert "<h1>Instructions</h1>" in agreed["reply"][1]["page"]
    assert agreed["rows"]["participant"][1] == Participant.Step.INSTRUCTIONS

    client.post(step_url(study), {"step": "consent", "decision": "agree"}, **JSON)  # now for real
    shown = both({"step": "instructions"})
    assert 'name="position"' in shown["reply"][1]["page"]
    assert shown["rows"]["participant"][1] == Participant.Step.ITEMS
    assert shown["rows"]["assignments"][0][1:] == (True, False)  # the first item shown, not answered
