"""The web processes' application in production: ASGI (gunicorn with uvicorn workers, docker-compose and the Helm
chart). Every view of the site is sync; a chat reply's stream (kinds/chat/stream.py) is an async iterator sent from
the event loop, so a process holds many open conversations at once. The same preloading as config/wsgi.py: the
URLconf and the warm analyses, once in gunicorn's master.

`SiteHandler` serves a request's middleware and view in ONE step on a thread of the process's request pool, as
the WSGI handler does in its thread. Django's own ASGI handler runs them as sync code adapted to async: a new thread
for every request, and six hand-overs between that thread and the event loop per request (the sync middleware
down to the async core, the view's middleware, the view, back up, the signals before and after), each waiting
for its turn on a loop that hundreds of streams share; under load that was most of a message's time to first
token (docs/performance.md). The pool's threads live as long as the process, so their database connections are
kept between requests under DB_CONN_MAX_AGE as under WSGI; the connections of a process are bounded by the pool
and the streams' database steps (kinds/chat/replies.py `db_step`), whatever the number of open streams.

`BoundedRequests` admits WEB_REQUESTS_AT_ONCE (default 8, the pool's size too) requests per process at a time from
arrival to the start of their response, the others wait their turn on the event loop. A stream counts only until
its first line (it then holds no connection), so open conversations do not use up the turns."""

import asyncio
import contextvars
import os
from concurrent.futures import ThreadPoolExecutor

import django
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.core.handlers.exception import response_for_exception
from django.http import FileResponse
from django.urls import set_script_prefix

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup(set_prefix=False)


class SiteHandler(ASGIHandler):
    """Django's ASGIHandler with each request's middleware and view run in one step on the request pool (see
    the module doc); the request's body is read and its response sent (a stream included) on the event loop.
    request_started and request_finished are sent in the request's pool thread, where its connections are."""

    def __init__(self, threads: int) -> None:
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="request")

    async def _in_pool(self, function, *args):
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self.pool, context.run, function, *args)

    def _respond(self, scope, request):
        signals.request_started.send(sender=self.__class__, scope=scope)
        try:
            response = self.get_response(request)
        except Exception as exc:  # the chain turns a view's errors into responses: this is the chain's own
            response = response_for_exception(request, exc)
        response._handler_class = self.__class__
        if isinstance(response, FileResponse):
            response.block_size = self.chunk_size
        return response

    def _finished(self, response) -> None:
        if response is None:
            signals.request_finished.send(sender=self.__class__)
        else:
            response.close()  # request_finished, with the response's own closers

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        await self.handle(scope, receive, send)

    async def handle(self, scope, receive, send):
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            body_file.close()
            await self.send_response(error_response, send)
            await self._in_pool(error_response.close)
            return

        async def process_request():
            response = await self._in_pool(self._respond, scope, request)
            try:
                await self.send_response(response, send)
            except asyncio.CancelledError:
                pass  # the client went away while the response was sent
            return response

        # As Django's handler: a client that disconnects while the response is produced or sent cancels it.
        tasks = [
            asyncio.create_task(self.listen_for_disconnect(receive)),
            asyncio.create_task(process_request()),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done():
                try:
                    task.result()
                except RequestAborted:
                    pass
                except AssertionError:
                    body_file.close()
                    raise
            else:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        try:
            response = tasks[1].result()
        except asyncio.CancelledError:
            response = None
        await self._in_pool(self._finished, response)
        body_file.close()


AT_ONCE = int(os.environ.get("WEB_REQUESTS_AT_ONCE", "8"))
application = SiteHandler(AT_ONCE)

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


application = BoundedRequests(application, AT_ONCE)
