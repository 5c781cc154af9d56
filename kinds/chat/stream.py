"""The reply's stream for an ASGI server: the events of kinds/chat/turns.py's `reply_events`, produced without a
thread or a worker waiting on the provider, so one web process holds hundreds of open conversations.

Django serves a StreamingHttpResponse chunk by chunk only when its iterator suits the server: an async iterator
under ASGI (a sync one is read whole first), a sync one under WSGI (`make run`'s runserver, gunicorn's sync
workers). `reply_lines(request, reply)` picks the one that streams; both read the same rules from turns.py — who
is asked in what order (`_sources`), the row's lease (`_claim`, `Lease`), the minimum wait (`_earliest`), the
completion once (`_complete_llm`) — and this module only waits asynchronously where turns.py sleeps or reads:
the provider through `live_respond_async`, the database steps in a thread each (generation/live.py's `_in_thread`
pattern: a connection of their own, closed after), the pauses with `asyncio.sleep`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.db import connection
from django.db.models import F
from django.utils import timezone

from studies.live import live_respond_async
from studies.models import Condition

from .models import Conversation, Turn
from .turns import (
    POLL,
    RENEW_EVERY,
    Chunk,
    Done,
    Failed,
    Reset,
    Wait,
    _claim,
    _complete_llm,
    _earliest,
    _sources,
    chat_settings,
    conversation_messages,
    reply_events,
    reply_shown,
)


def event_line(event) -> str | None:
    """One event as the line of JSON the page's script reads (None: nothing to send)."""
    if isinstance(event, Chunk):
        return json.dumps({"chunk": event.text}) + "\n"
    if isinstance(event, Wait):
        return json.dumps({"wait": event.text}) + "\n"
    if isinstance(event, Reset):
        return json.dumps({"reset": True}) + "\n"
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
                await _db(reply_shown, event.turn)
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


async def _db(step, *args):
    """A database step of turns.py in a thread, on a connection closed after it (an open stream holds none)."""

    def run():
        try:
            return step(*args)
        finally:
            connection.close()

    return await sync_to_async(run, thread_sensitive=False)()


async def _hold_until(moment) -> None:
    delay = (moment - timezone.now()).total_seconds()
    if delay > 0:
        await asyncio.sleep(delay)


def _load(turn_id: int):
    turn = Turn.objects.get(pk=turn_id)
    conversation = Conversation.objects.select_related("condition", "participant__study").get(
        pk=turn.conversation_id
    )
    settings = chat_settings(conversation.participant.study)
    return turn, conversation, settings, _sources(conversation, settings)


async def reply_events_async(turn: Turn) -> AsyncIterator:
    """turns.reply_events for `async for` (the same events, the same rules)."""
    turn, conversation, settings, sources = await _db(_load, turn.pk)
    waited = False
    while True:
        if turn.status == Turn.Status.COMPLETE:
            await _hold_until(_earliest(turn, settings))
            yield Done(turn)
            return
        lease = await _db(_claim, turn, timezone.now())
        if lease is not None:
            break
        if not waited:
            waited = True
            yield Wait("Your reply is on its way.")
        await asyncio.sleep(POLL)
        turn = await _db(_fresh, turn.pk)
    try:
        shown_any = False
        for attempt, (condition, is_fallback) in enumerate(sources):
            if attempt:
                if shown_any:
                    yield Reset()
                    shown_any = False
                yield Wait()
            if condition.kind != Condition.Kind.LLM:
                done = None
                yield Wait("A person is writing their reply.")
                async for answered in _person_wait(turn, settings, lease):
                    done = answered
                if done is not None:
                    yield Done(done)
                    return
                continue
            outcome = None
            async for item in _call(turn, conversation, settings, lease, condition, is_fallback):
                if isinstance(item, Chunk):
                    yield item
                else:
                    outcome = item
            if isinstance(outcome, Turn):
                yield Done(outcome)
                return
            shown_any = shown_any or bool(outcome)
        yield Failed()
    finally:
        await asyncio.shield(_db(lease.release))


def _fresh(turn_id: int) -> Turn:
    return Turn.objects.get(pk=turn_id)


async def _person_wait(turn: Turn, settings, lease) -> AsyncIterator[Turn | None]:
    """turns._person_wait's rule, polled with asyncio.sleep: yields the completed row, or None past the limit."""
    deadline = turn.sent_at + timedelta(seconds=settings.person_reply_seconds)
    while timezone.now() < deadline:
        fresh = await _db(_fresh, turn.pk)
        if fresh.status == Turn.Status.COMPLETE:
            await _hold_until(_earliest(fresh, settings))
            yield fresh
            return
        if not await _db(lease.renew):
            break
        await asyncio.sleep(POLL)
    yield None


def _attempt_start(turn: Turn, conversation: Conversation, condition: Condition) -> list[dict]:
    Turn.objects.filter(pk=turn.pk).update(attempts=F("attempts") + 1, condition=condition)
    return conversation_messages(conversation, before=turn.index)


def _attempt_failed(turn_id: int, error: str, live_call_id) -> None:
    Turn.objects.filter(pk=turn_id).update(error=error[:2000], live_call=live_call_id)


async def _call(turn, conversation, settings, lease, condition, is_fallback) -> AsyncIterator:
    """turns._call for `async for`: Chunks, then last the completed Turn or whether any text was shown."""
    messages = await _db(_attempt_start, turn, conversation, condition)
    context = {
        "participant": conversation.participant_id,
        "conversation": conversation.pk,
        "turn": turn.index,
    }
    earliest = _earliest(turn, settings)
    held: list[str] = []
    shown = False
    first_token_at = None
    reply = None
    try:
        reply = await live_respond_async(condition=condition, messages=messages, context=context)
        async for text in reply:
            if first_token_at is None:
                first_token_at = timezone.now()
            held.append(text)
            if timezone.now() >= earliest:
                yield Chunk("".join(held))
                held.clear()
                shown = True
            if time.monotonic() - lease.renewed >= RENEW_EVERY and not await _db(lease.renew):
                await reply.aclose()
                yield shown  # the lease lapsed and another request took the row over
                return
    except (GeneratorExit, asyncio.CancelledError):
        if reply is not None:
            await reply.aclose()
        raise
    except Exception as exc:  # a provider's error, the limiter's wait, the budget: the next source tries
        record = getattr(reply, "record", None)
        await _db(_attempt_failed, turn.pk, f"{type(exc).__name__}: {exc}", getattr(record, "pk", None))
        yield shown
        return
    completed = await _db(_complete_llm, turn, lease, reply, first_token_at, condition, is_fallback)
    if completed is None:
        yield shown
        return
    await _hold_until(earliest)
    if held:
        yield Chunk("".join(held))
    yield completed
