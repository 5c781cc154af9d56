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

from .models import Turn
from .replies import Chunk, Done, Failed, Reset, Wait, db_step, reply_events, reply_events_async
from .safety import reply_withheld
from .turns import reply_shown


def event_line(event) -> str | None:
    """One event as the line of JSON the page's script reads (None: nothing to send)."""
    if isinstance(event, Chunk):
        return json.dumps({"chunk": event.text}) + "\n"
    if isinstance(event, Wait):
        return json.dumps({"wait": event.text}) + "\n"
    if isinstance(event, Reset):
        return json.dumps({"reset": True}) + "\n"
    if isinstance(event, Done) and (event.turn.closes_conversation or reply_withheld(event.turn)):
        # The page is shown again: with its closing note, or the withheld reply's replacement (and the support
        # resources first when it named a crisis).
        return json.dumps({"go": True}) + "\n"
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
