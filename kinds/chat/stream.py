"""The reply's stream: the events of kinds/chat/replies.py as the lines of JSON the page's script reads.

Django serves a StreamingHttpResponse chunk by chunk only when its iterator suits the server: an async iterator
under ASGI (a sync one is read whole first), a sync one under WSGI (`make run`'s runserver, gunicorn's sync
workers). `reply_lines(request, reply)` picks the one that streams. Both read replies.py's one implementation of a
reply: under ASGI `reply_events_async` on the server's event loop, without a thread or a worker waiting on the
provider (so one web process holds hundreds of open conversations); under WSGI `reply_events`, the same
generator driven from the request's thread.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.db import connection

from .models import Turn
from .replies import Chunk, Done, Failed, Reset, Wait, db_step, reply_events, reply_events_async
from .turns import reply_shown


def event_line(event) -> str | None:
    """One event as the line of JSON the page's script reads (None: nothing to send)."""
    if isinstance(event, Chunk):
        return json.dumps({"chunk": event.text}) + "\n"
    if isinstance(event, Wait):
        return json.dumps({"wait": event.text}) + "\n"
    if isinstance(event, Reset):
        return json.dumps({"reset": True}) + "\n"
    if isinstance(event, Done) and event.turn.closes_conversation:
        return json.dumps({"go": True}) + "\n"  # the page is shown again, with its closing note
    if isinstance(event, Done):
        return json.dumps({"done": event.turn.index, "text": event.turn.text}) + "\n"
    if isinstance(event, Failed):
        return json.dumps({"failed": event.text}) + "\n"
    return None


def reply_lines(request, reply: Turn) -> Iterator[str] | AsyncIterator[str]:
    """The reply's lines (a padding line first, so buffers let the stream start at once), async under ASGI."""
    return _lines_async(reply) if hasattr(request, "scope") else _lines(reply)


def _lines(reply: Turn) -> Iterator[str]:
    yield json.dumps({"start": reply.index}) + "\n"
    for event in reply_events(reply):
        if isinstance(event, Done):
            reply_shown(event.turn)
        line = event_line(event)
        if line:
            yield line


async def _lines_async(reply: Turn) -> AsyncIterator[str]:
    # The request's view and middleware ran in the request's thread and left its database connection open until
    # the response ends: closed now, so the open stream holds none (its own steps each open and close one).
    await sync_to_async(_request_connection_close, thread_sensitive=True)()
    yield json.dumps({"start": reply.index}) + "\n"
    events = reply_events_async(reply)
    try:
        async for event in events:
            if isinstance(event, Done):
                await db_step(reply_shown, event.turn)
            line = event_line(event)
            if line:
                yield line
    finally:
        await events.aclose()


def _request_connection_close() -> None:
    """Close the connection the request's view left open. The server may hand this step to another thread than
    the one that opened it (the connection is the request context's): closing is allowed across threads here,
    the request's own work being done."""
    connection.inc_thread_sharing()
    try:
        connection.close()
    finally:
        connection.dec_thread_sharing()
