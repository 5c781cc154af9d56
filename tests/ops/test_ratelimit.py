"""Rate limits and the honeypot, on small views decorated exactly like the participant pages."""

import time

import pytest

from bench.targets.models import FloorWrite
from config.ratelimit import HONEYPOT_FIELD
from tests.ratelimits import rate_limits_on

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.ops.urls")]


@pytest.fixture(autouse=True)
def _one_window(monkeypatch):
    """Every request of a test falls in the same one-minute window (the middle of one)."""
    from config import ratelimit

    monkeypatch.setattr(ratelimit, "_now", lambda: 1_700_000_010.0)


@pytest.fixture(autouse=True)
def _fresh_limits(settings, redis_url):
    rate_limits_on(settings, entry=5, participant=8)


def test_entry_gives_a_friendly_429_after_the_per_ip_limit(client):
    statuses = [client.get("/entry/", {"PROLIFIC_PID": f"p{i}"}).status_code for i in range(7)]
    assert statuses == [200] * 5 + [429] * 2
    response = client.get("/entry/", {"PROLIFIC_PID": "another"})
    assert response.status_code == 429
    assert int(response["Retry-After"]) <= 61
    assert "Please wait a moment" in response.content.decode()
    assert "Your answers so far are saved" in response.content.decode()


def test_the_per_ip_limit_counts_the_address_the_trusted_proxy_saw(client, settings):
    settings.RATELIMIT_TRUSTED_PROXIES = 1
    for i in range(10):  # ten different people behind the same proxy: all let in
        headers = {"X-Forwarded-For": f"10.0.0.{i}"}
        assert client.get("/entry/", {"PROLIFIC_PID": f"p{i}"}, headers=headers).status_code == 200
    # One address forging extra hops in front still counts as itself.
    assert _entries_forwarded_for(client, "q", "1.2.3.{i}, 10.0.0.99")[-1] == 429


def _entries_forwarded_for(client, pid_prefix: str, forwarded: str, n: int = 6) -> list[int]:
    """The statuses of n entries of new ids, each claiming to be forwarded for `forwarded` ({i}: its number)."""
    return [
        client.get(
            "/entry/",
            {"PROLIFIC_PID": f"{pid_prefix}{i}"},
            headers={"X-Forwarded-For": forwarded.format(i=i)},
        ).status_code
        for i in range(n)
    ]


def test_an_untrusted_forwarded_for_header_does_not_escape_the_per_ip_limit(client):
    assert _entries_forwarded_for(client, "p", "10.0.0.{i}")[-1] == 429


def test_each_participant_has_their_own_per_minute_limit(client):
    client.cookies["sessionid"] = "participant-a"
    assert [client.get("/page/").status_code for _ in range(9)] == [200] * 8 + [429]
    client.cookies["sessionid"] = "participant-b"
    assert client.get("/page/").status_code == 200


def test_limits_can_be_switched_off(client, settings):
    settings.RATELIMIT_ENABLED = False
    assert {client.get("/entry/", {"PROLIFIC_PID": f"p{i}"}).status_code for i in range(12)} == {200}


def test_the_honeypot_is_in_every_post_form_and_hidden_from_people(client):
    html = client.get("/form/").content.decode()
    assert f'name="{HONEYPOT_FIELD}"' in html
    assert 'aria-hidden="true"' in html and 'tabindex="-1"' in html


def test_a_bot_filling_the_honeypot_gets_nothing_stored(client):
    response = client.post("/form/", {"answer": "3", HONEYPOT_FIELD: "http://spam.example"})
    assert response.status_code == 400
    assert FloorWrite.objects.count() == 0
    assert client.post("/form/", {"answer": "3", HONEYPOT_FIELD: ""}).content == b"stored"
    assert FloorWrite.objects.count() == 1


def test_the_rate_limiter_fails_open_when_redis_stops(client, settings, throwaway_redis):
    proc, url = throwaway_redis
    settings.REDIS_URL = url
    settings.CACHES = {
        **settings.CACHES,
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        },
    }
    client.cookies["sessionid"] = "participant-c"
    assert [client.get("/page/").status_code for _ in range(9)][-1] == 429  # the limiter works on this Redis
    proc.kill()
    proc.wait()
    client.cookies["sessionid"] = "participant-d"
    started = time.monotonic()
    assert [client.get("/page/").status_code for _ in range(12)] == [200] * 12
    assert time.monotonic() - started < 10  # no request hangs on the dead store


def test_twice_the_limit_cannot_be_made_across_a_window_boundary(client, monkeypatch):
    """Sliding windows: the previous minute's requests still count, weighted by how much of it is within the
    last sixty seconds, so five requests at 11:59:59 and five more at 12:00:01 are not all let through."""
    from config import ratelimit

    boundary = 1_700_000_040.0  # a multiple of 60: a window starts here
    monkeypatch.setattr(ratelimit, "_now", lambda: boundary - 1)
    before = [client.get("/entry/", {"PROLIFIC_PID": f"b{i}"}).status_code for i in range(5)]
    monkeypatch.setattr(ratelimit, "_now", lambda: boundary + 1)
    after = [client.get("/entry/", {"PROLIFIC_PID": f"a{i}"}).status_code for i in range(5)]
    assert before == [200] * 5 and after == [429] * 5  # fixed windows let all ten through
    # 45 s into the minute after (the refused requests counted too): three quarters of it has slid out.
    monkeypatch.setattr(ratelimit, "_now", lambda: boundary + 105)
    assert client.get("/entry/", {"PROLIFIC_PID": "later"}).status_code == 200
