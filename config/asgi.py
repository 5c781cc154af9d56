"""The web processes' application in production: ASGI (gunicorn with uvicorn workers, docker-compose and the Helm
chart). Django runs the site's sync views in a thread each, as under WSGI, and serves an async view's stream (a
chat reply, kinds/chat/stream.py) from the event loop, so a process holds many open conversations at once.
The same preloading as config/wsgi.py: the URLconf and the warm analyses, once in gunicorn's master.

Under ASGI nothing bounds how many requests a process runs at once, and each sync view holds a database
connection while it runs: `BoundedRequests` admits WEB_REQUESTS_AT_ONCE (default 8) requests per process at a
time from arrival to the start of their response, the others wait their turn on the event loop. A stream counts
only until its first line (it then holds no connection), so open conversations do not use up the turns."""

import asyncio
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# No persistent connections under ASGI: each request's view runs in a thread that ends with the request, so a
# connection kept open past the request (DB_CONN_MAX_AGE > 0) is never reused and stays open until the garbage
# collector finds it: in bench/replicas.py a stack whose one listening web process ran two uvicorn workers held
# 60-85 connections that way. With 0 each request closes its connection at its end (pool them with PgBouncer).
os.environ["DB_CONN_MAX_AGE"] = "0"
application = get_asgi_application()

from config.warm import server_preload  # noqa: E402 - it reads the kinds' registry: after Django is set up

server_preload()


class BoundedRequests:
    """At most `limit` HTTP requests of this process between their arrival and the start of their response."""

    def __init__(self, app, limit: int) -> None:
        self.app, self.limit = app, limit
        self._gates: dict[int, asyncio.Semaphore] = {}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        loop = id(asyncio.get_running_loop())
        gate = self._gates.setdefault(loop, asyncio.Semaphore(self.limit))
        await gate.acquire()
        held = True

        async def sending(message):
            nonlocal held
            if held and message["type"] == "http.response.start":
                held = False
                gate.release()
            await send(message)

        try:
            return await self.app(scope, receive, sending)
        finally:
            if held:
                gate.release()


application = BoundedRequests(application, int(os.environ.get("WEB_REQUESTS_AT_ONCE", "8")))
