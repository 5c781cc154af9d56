"""config/asgi.py's SiteHandler: a request's middleware and view run in one step on a thread of the process's
request pool, whose database connection the next request reuses (Django's own ASGI handler runs each request in a
new thread, so nothing could be kept); request_started and request_finished run in that thread; a response's
async stream is still sent part by part from the event loop; the site's pages answer through it."""

from __future__ import annotations

import asyncio
import re
import threading

import pytest
from django.core import signals
from django.db import connection
from django.http import HttpResponse, StreamingHttpResponse
from django.test import override_settings
from django.urls import path

from config.asgi import SiteHandler
from tests.aio import run_async
from tests.ratings.helpers import entry_url

pytestmark = pytest.mark.django_db(transaction=True)
SEEN: list[dict] = []
STREAM_GATE: dict = {}


def _seen_view(request):
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    SEEN.append(
        {"thread": threading.current_thread(), "connection": id(connection.connection), "what": "view"}
    )
    return HttpResponse("ok")


def _stream_view(request):
    async def parts():
        yield "first\n"
        await STREAM_GATE["go"].wait()  # set only once the first part has reached the client
        yield "second\n"

    return StreamingHttpResponse(parts(), content_type="text/plain")


urlpatterns = [path("seen/", _seen_view), path("stream/", _stream_view)]


async def _request(app, path_, *, method="GET", on_body=None, headers=(), body=b"", keep=None):
    sent: list[dict] = []
    received = False

    async def receive():
        nonlocal received
        if not received:
            received = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client stays connected

    async def send(message):
        sent.append(message)
        if on_body and message["type"] == "http.response.body":
            on_body(message)

    scope = {"type": "http", "method": method, "path": path_, "query_string": b"", "headers": list(headers),
             "server": ("testserver", 80), "client": ("127.0.0.1", 5000), "scheme": "http", "root_path": "",
             "asgi": {"version": "3.0"}, "http_version": "1.1"}  # fmt: skip
    if "?" in path_:
        scope["path"], query = path_.split("?", 1)
        scope["query_string"] = query.encode()
    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    if keep:
        keep(start["headers"])
    status = start["status"]
    return status, [m.get("body", b"") for m in sent if m["type"] == "http.response.body"]


@pytest.fixture
def handler():
    site = SiteHandler(1)
    yield site
    # The pool thread's kept connection, closed in that thread before the test database goes.
    site.pool.submit(lambda: connection.close()).result()
    site.pool.shutdown()


@override_settings(ROOT_URLCONF=__name__, ALLOWED_HOSTS=["testserver"])
def test_each_request_runs_in_one_pool_thread_that_keeps_its_connection_for_the_next(handler):
    SEEN.clear()

    def started(**kwargs):
        SEEN.append({"thread": threading.current_thread(), "what": "started"})

    def finished(**kwargs):
        SEEN.append({"thread": threading.current_thread(), "what": "finished"})

    signals.request_started.connect(started)
    signals.request_finished.connect(finished)
    try:

        async def two():
            return [await _request(handler, "/seen/"), await _request(handler, "/seen/")]

        answers = run_async(two())
    finally:
        signals.request_started.disconnect(started)
        signals.request_finished.disconnect(finished)
    assert [status for status, _ in answers] == [200, 200]
    assert [s["what"] for s in SEEN] == ["started", "view", "finished"] * 2
    threads = {s["thread"] for s in SEEN}
    assert len(threads) == 1 and next(iter(threads)).name.startswith("request")
    views = [s for s in SEEN if s["what"] == "view"]
    assert views[0]["connection"] == views[1]["connection"]  # kept: not opened again for the second request


@override_settings(ROOT_URLCONF=__name__, ALLOWED_HOSTS=["testserver"])
def test_an_async_stream_is_sent_part_by_part(handler):
    async def main():
        STREAM_GATE["go"] = asyncio.Event()
        bodies = []

        def on_body(message):
            bodies.append(message.get("body", b""))
            if message.get("body") == b"first\n":
                STREAM_GATE["go"].set()  # only reachable if the first part was sent before the second exists

        status, _ = await asyncio.wait_for(_request(handler, "/stream/", on_body=on_body), 10)
        return status, bodies

    status, bodies = run_async(main())
    assert status == 200 and bodies[:2] == [b"first\n", b"second\n"]


def test_a_participant_enrols_and_posts_a_form_through_it(handler):
    from kinds.chat.demo import chat_demo_create

    study = chat_demo_create()
    url, query = entry_url(study, "SITE1")
    cookies: dict[str, str] = {}

    async def walk():
        def headers():
            jar = "; ".join(f"{k}={v}" for k, v in cookies.items())
            return [(b"cookie", jar.encode()), (b"host", b"testserver"), (b"origin", b"http://testserver"),
                    (b"referer", f"http://testserver/s/{study.slug}/step/".encode())]  # fmt: skip

        def keep(answer_headers):
            for name, value in answer_headers:
                if name.lower() == b"set-cookie":
                    key, _, rest = value.decode().partition("=")
                    cookies[key] = rest.split(";", 1)[0]

        query_string = "&".join(f"{k}={v}" for k, v in query.items())
        entered = await _request(handler, f"{url}?{query_string}", headers=headers(), keep=keep)
        page = await _request(handler, f"/s/{study.slug}/step/", headers=headers(), keep=keep)
        token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', b"".join(page[1])).group(1)
        step = re.search(rb'name="step" value="([^"]+)"', b"".join(page[1])).group(1)
        body = b"csrfmiddlewaretoken=" + token + b"&step=" + step + b"&decision=agree"
        posted = await _request(
            handler, f"/s/{study.slug}/step/", method="POST", body=body,
            headers=[*headers(), (b"content-type", b"application/x-www-form-urlencoded")], keep=keep,
        )  # fmt: skip
        return entered[0], page[0], posted[0]

    assert run_async(walk()) == (200, 200, 302)  # the study page, the consent page, consent given
    assert run_async(_request(handler, "/healthz"))[0] == 200
