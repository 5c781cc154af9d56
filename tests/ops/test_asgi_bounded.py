"""config/asgi.py's BoundedRequests: at most `limit` requests of a process run their view at once (each holds a
database connection), and a stream leaves the count once its response has started."""

import asyncio

from config.asgi import BoundedRequests
from tests.aio import run_async


def test_no_more_than_the_limit_run_before_their_response_starts_and_streams_do_not_count():
    inside = {"now": 0, "most": 0}
    streams_open = {"now": 0, "most": 0}
    all_open = asyncio.Event()

    async def app(scope, receive, send):
        inside["now"] += 1
        inside["most"] = max(inside["most"], inside["now"])
        await asyncio.sleep(0.01)  # the view's work
        inside["now"] -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        if scope["path"] == "/stream":
            streams_open["now"] += 1
            streams_open["most"] = max(streams_open["most"], streams_open["now"])
            if streams_open["now"] == 20:
                all_open.set()
            try:  # the reply streams until every stream is open (never, were streams still counted)
                await asyncio.wait_for(all_open.wait(), 10)
            except TimeoutError:
                pass
            streams_open["now"] -= 1
        await send({"type": "http.response.body", "body": b""})

    bounded = BoundedRequests(app, 3)

    async def main():
        async def send(message):
            pass

        async def receive():
            return {"type": "http.request"}

        requests = [{"type": "http", "path": "/stream" if n % 2 else "/page"} for n in range(40)]
        await asyncio.gather(*(bounded(scope, receive, send) for scope in requests))

    run_async(main())
    assert inside["most"] == 3  # the views: never more than the limit
    assert streams_open["most"] == 20  # every stream open together: they left the count at their first byte
