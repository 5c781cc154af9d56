"""The participant's ticket (ratings/tickets.py): set where a browser becomes the participant, valid for one
study only, the participant's only name (no session); every request that carries it is counted once by the
rate limiter, however many of the participant's requests arrive at once. A browser that enrolled before
tickets is still its session's."""

import pytest
from django.core import signing
from django.test import Client

from config import ratelimit
from kinds.rating.models import Rating
from ratings import tickets
from ratings.selectors import session_key
from studies.models import Participant
from tests.concurrency import race
from tests.factories import rating_study_build
from tests.ratelimits import rate_limits_on
from tests.ratings.helpers import POSITION, enter, first_item, item_positions, step_url

pytestmark = pytest.mark.postgres
JSON = {"HTTP_ACCEPT": "application/json"}
NOW = 1_800_000_030.0  # 30 s into a window of the limiter


@pytest.fixture
def study():
    return rating_study_build(conditions=1, prompts=8, items_per_participant=4)


@pytest.fixture
def limited(settings, redis_url, monkeypatch):
    """Rate limits on, the limiter's clock pinned; returns the list of the limiter's (Redis) counts made."""
    rate_limits_on(settings, monkeypatch, now=NOW)  # each test lowers the limit once on the items
    counts = []
    hits = ratelimit._hits

    def counted(checks, **kwargs):
        counts.append([bucket for bucket, _identity, _limit in checks])
        return hits(checks, **kwargs)

    monkeypatch.setattr(ratelimit, "_hits", counted)
    return counts


def post(client, study, position, value=2):
    return client.post(step_url(study), {"step": "items", "position": position, "value": value}, **JSON)


@pytest.mark.django_db
def test_the_entry_sets_a_ticket_valid_for_its_study_only(client, study, settings):
    other = rating_study_build(conditions=1, prompts=3, items_per_participant=2)
    enter(client, study, "PID1")
    participant = Participant.objects.get(external_id="PID1")
    cookie = client.cookies[settings.PARTICIPANT_TICKET_COOKIE_NAME]
    assert cookie["path"] == f"/s/{study.slug}/" and cookie["httponly"] and cookie["samesite"] == "Lax"
    assert signing.TimestampSigner(salt=f"ratings.ticket:{study.slug}").unsign(cookie.value) == str(
        participant.pk
    )
    with pytest.raises(signing.BadSignature):
        signing.TimestampSigner(salt=f"ratings.ticket:{other.slug}").unsign(cookie.value)


@pytest.mark.django_db
def test_an_answer_with_its_ticket_is_counted_once_by_the_limiter_and_refused_past_the_limit(
    client, study, limited, settings, monkeypatch
):
    """Every answer counts, stored or not; past the limit nothing is stored until the next window."""
    first_item(client, study, "PID1")
    settings.RATELIMIT_PARTICIPANT = 3
    participant = Participant.objects.get()
    first, second, third, _fourth = item_positions(participant)
    limited.clear()
    monkeypatch.setattr(ratelimit, "_now", lambda: NOW + 120)  # windows of its own: the set-up counted too

    assert post(client, study, first).json()["saved"] is True
    assert post(client, study, first).status_code == 200  # a repeat: nothing stored
    assert post(client, study, second).json()["saved"] is True
    refused = post(client, study, third)  # the fourth request of the window
    assert refused.status_code == 429 and refused["Retry-After"] == "31"
    assert limited == [["participant"]] * 4  # each request counted once
    assert sorted(r.assignment.position for r in Rating.objects.all()) == [first, second]
    monkeypatch.setattr(ratelimit, "_now", lambda: NOW + 240)  # later windows: allowed again
    assert post(client, study, third).json()["saved"] is True


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["tampered", "another study's", "expired"])
def test_an_answer_without_a_valid_ticket_is_the_sessions_and_counted_by_the_limiter(
    client, study, limited, settings, requires_postgres, kind
):
    """A browser that enrolled before tickets, whose session names the participant: the answer is stored for
    them and counted in Redis. Without that session, nobody's: nothing stored, the page sent to the entry."""
    first_item(client, study, "PID1")
    participant = Participant.objects.get()
    first = item_positions(participant)[0]
    assert settings.SESSION_COOKIE_NAME not in client.cookies  # a participant's browser has no session
    name = settings.PARTICIPANT_TICKET_COOKIE_NAME
    if kind == "tampered":
        client.cookies[name] = signing.TimestampSigner(salt="forged").sign(str(participant.pk + 1))
    elif kind == "another study's":
        client.cookies[name] = signing.TimestampSigner(salt="ratings.ticket:another").sign(
            str(participant.pk)
        )
    else:
        settings.SESSION_COOKIE_AGE = (
            -1
        )  # every ticket is past its age (the session's cookie is not read here)
    assert tickets.participant_id(_Request(client), slug=study.slug) is None
    assert post(client, study, first).json() == {"next": f"/s/{study.slug}/"}
    assert not Rating.objects.exists()
    session = client.session  # the session of a browser that enrolled before tickets
    session[session_key(study.slug)] = participant.pk
    session.set_expiry(3600)  # its own age: SESSION_COOKIE_AGE is what makes a ticket expire here
    session.save()
    limited.clear()
    assert post(client, study, first).json()["saved"] is True
    assert limited == [["participant"]]  # counted once, by the limiter
    assert Rating.objects.get().assignment.participant_id == participant.pk


class _Request:
    """What `tickets.participant_id` reads of a request: its cookies."""

    def __init__(self, client):
        self.COOKIES = {name: morsel.value for name, morsel in client.cookies.items()}


@pytest.mark.django_db(transaction=True)
def test_a_participants_requests_at_once_are_each_counted_and_the_limit_holds(
    limited, settings, requires_postgres, monkeypatch
):
    """12 tabs post the current item at once, with a limit of 5: each request is counted once by the limiter;
    5 are answered (one stores the rating, the others find it stored) and 7 refused."""
    study = rating_study_build(conditions=1, prompts=6, items_per_participant=4)
    browser = Client()
    current = int(POSITION.search(first_item(browser, study, "PID1"))[1])
    settings.RATELIMIT_PARTICIPANT = 5
    limited.clear()
    monkeypatch.setattr(ratelimit, "_now", lambda: NOW + 120)  # windows of its own: the set-up counted too

    def tab(i):
        other = Client()
        other.cookies = browser.cookies
        return post(other, study, current, 1 + i % 3).status_code

    statuses, errors = race(tab, 12)

    assert not errors
    assert sorted(statuses.values()) == [200] * 5 + [429] * 7
    assert limited == [["participant"]] * 12
    assert Rating.objects.filter(assignment__position=current).count() == 1 == Rating.objects.count()


@pytest.mark.django_db
def test_a_request_checks_its_ticket_once_however_often_it_is_asked(client, study, limited, monkeypatch):
    """The limiter and the view both ask who the participant is: the ticket's signature is checked once."""
    enter(client, study, "PID1")
    checked = []
    unsign = signing.TimestampSigner.unsign
    monkeypatch.setattr(
        signing.TimestampSigner, "unsign", lambda self, *a, **k: checked.append(1) or unsign(self, *a, **k)
    )
    assert post(client, study, 0).json() == {"next": step_url(study)}  # nothing stored: not on the items yet
    assert len(checked) == 1 and not Rating.objects.exists()
