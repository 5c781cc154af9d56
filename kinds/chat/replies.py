"""Producing a pending reply (kinds/chat/turns.py stores the rows), as events a page shows: `Chunk` text as it
streams, `Wait` "a moment", `Reset` the text shown so far is dropped for a new attempt, then `Done` or `Failed`.

* One request produces a pending reply at a time: it takes the row's lease (`claimed_until`, an UPDATE that only
  one request wins), renews it while the reply streams, and completes the row only while it still holds the
  lease: a reply is stored once, never twice. A request that finds the lease held waits for that reply (a second
  tab, a refresh while the first stream still runs); one that finds it lapsed (a web process killed mid-stream)
  takes it over; a stream closed by a lost connection gives the lease back at once. So a refresh or a lost
  connection resumes where the conversation stands, and the pending row is answered by whichever request
  produces it.
* A failed or timed-out call is tried once more, then by the study's fallback condition (`Turn.condition`
  says who answered, `Conversation.fallback_used` is set); if that fails too, the row stays pending and the
  participant may try again. A person source's reply is typed at the responder console (turns.py
  `reply_complete`); past the study's time limit a reply, the fallback answers.
* No reply appears sooner than the study's minimum wait after the participant sent their message: the chunks
  are held back until then (Rubin et al. 2025: the wait matters).
* Spending limits (kinds/chat/budget.py): a call the budget refuses goes to the fallback, whose reply ends the
  conversation; a token cap reached, or a fallback refused too, closes it politely (turns.py `reply_close`).

One implementation produces a reply: `reply_events_async` (an ASGI server's stream, kinds/chat/stream.py, reads it
on its event loop: the provider through `live_respond_async`, each database step in a thread of the loop's
pool (`db_step`), the pauses with asyncio.sleep). `reply_events` is the same generator for a sync
caller (runserver, the form post without JavaScript): it is driven on an event loop in a thread of its own.
Before a reply's first token there are two such steps: the row read and its lease taken with the attempt counted
(`reply_claim`), then the model's settings read with the study's and the provider's limits
(generation/live.py).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import F, Q
from django.utils import timezone

from generation.budget import BudgetSpent, TokenCapReached
from generation.live import db_step
from studies.live import live_respond_async
from studies.models import Condition

from .models import ChatSettings, Conversation, Turn
from .safety import ReplyScreen, message_check, reply_verdict_apply, reply_withheld
from .turns import chat_settings, conversation_messages, reply_close, reply_config_fields, reply_row_complete

LEASE = timedelta(seconds=30)  # a reply's producer holds its row this long, renewed while chunks arrive
RENEW_EVERY = 5.0  # seconds between renewals of the lease
POLL = 0.25  # seconds between looks at a reply another request (or a person) is producing
STATED_WAIT_AFTER = timedelta(seconds=5)  # a person slower than this: the participant is told the limit
WAIT_TEXT = "One moment: the reply is taking a little longer than usual."


@dataclass(frozen=True)
class Chunk:
    text: str


@dataclass(frozen=True)
class Wait:
    text: str = WAIT_TEXT


@dataclass(frozen=True)
class Reset:
    """The text shown so far is dropped: another attempt starts."""


@dataclass(frozen=True)
class Done:
    turn: Turn


@dataclass(frozen=True)
class Failed:
    text: str = "The reply could not be fetched. Please try again."


# --- the lease -------------------------------------------------------------------------------------------


@dataclass
class Lease:
    """A request's hold on a pending reply: the row's `claimed_until` as this request last wrote it."""

    turn_id: int
    until: datetime
    renewed: float = 0.0  # time.monotonic() of the last renewal

    def due(self) -> bool:
        """Whether the lease is to be renewed now (RENEW_EVERY seconds since the last renewal)."""
        return time.monotonic() - self.renewed >= RENEW_EVERY

    def renew(self, *, force: bool = False) -> bool:
        """Extends the lease (at most every RENEW_EVERY seconds unless `force`); False when it was lost to another
        request, or the row is no longer pending."""
        if not force and not self.due():
            return True
        until = timezone.now() + LEASE
        updated = Turn.objects.filter(
            pk=self.turn_id, status=Turn.Status.PENDING, claimed_until=self.until
        ).update(claimed_until=until)
        if updated:
            self.until, self.renewed = until, time.monotonic()
        return bool(updated)

    def release(self) -> None:
        Turn.objects.filter(pk=self.turn_id, status=Turn.Status.PENDING, claimed_until=self.until).update(
            claimed_until=None
        )


def reply_claim(turn: Turn, now: datetime, *, attempt: Condition | None = None) -> Lease | None:
    """Takes the pending reply's lease when nobody holds it (or it lapsed); None when another request holds it.
    `attempt`: the lease is taken to ask this LLM condition at once, counted in the same UPDATE."""
    until = now + LEASE
    fields = {"claimed_until": until}
    if attempt is not None:
        fields.update(attempts=F("attempts") + 1, condition=attempt)
    updated = Turn.objects.filter(
        Q(claimed_until__isnull=True) | Q(claimed_until__lt=now), pk=turn.pk, status=Turn.Status.PENDING
    ).update(**fields)
    return Lease(turn.pk, until, time.monotonic()) if updated else None


# --- producing a reply: one implementation (async), driven by the sync `reply_events` -----------------------


def reply_sources(conversation: Conversation, settings: ChatSettings) -> list[tuple[Condition, bool]]:
    """Who is asked, in order, as (condition, is the fallback): an LLM source twice (the call, then its one
    retry), then the fallback; a person source, then the fallback."""
    source = conversation.condition
    tries = [(source, False), (source, False)] if source.kind == Condition.Kind.LLM else [(source, False)]
    fallback = settings.fallback_condition
    if fallback is not None and fallback.pk != source.pk and fallback.kind == Condition.Kind.LLM:
        tries.append((fallback, True))
    return tries


def reply_earliest(turn: Turn, settings: ChatSettings) -> datetime:
    """The reply is not shown before this: the participant's message time plus the study's minimum wait."""
    return turn.sent_at + timedelta(milliseconds=settings.min_reply_wait_ms)


async def _hold_until(moment: datetime) -> None:
    delay = (moment - timezone.now()).total_seconds()
    if delay > 0:
        await asyncio.sleep(delay)


@dataclass(frozen=True)
class _Outcome:
    """The last item of a step's iterator (an async generator returns no value): what the step came to."""

    value: object


@dataclass(frozen=True)
class _Limited:
    """A call a spending limit refused, nothing sent: `reason` (Turn.CLOSE_REASONS); the budget's, not the cap's,
    leaves the fallback to try."""

    reason: str
    fallback_may_answer: bool


@dataclass
class _Reply:
    """What producing one reply reads once: its conversation, the study's settings, who is asked in order and
    what they are sent."""

    conversation: Conversation
    settings: ChatSettings
    sources: list[tuple[Condition, bool]]
    messages: list[dict]


def _state_claim(turn_id: int, known: _Reply | None, settings: ChatSettings | None):
    """One database step before a reply's first token: the row as it stands, what the reply reads (`known`, or
    loaded now) and, when the row is pending and nobody holds it, its lease, taken with the first source's
    attempt counted when that source is a model."""
    turn = Turn.objects.get(pk=turn_id)
    if known is None:
        conversation = Conversation.objects.select_related("condition", "participant__study").get(
            pk=turn.conversation_id
        )
        settings = settings or chat_settings(conversation.participant.study)
        known = _Reply(
            conversation,
            settings,
            reply_sources(conversation, settings),
            conversation_messages(conversation, before=turn.index),
        )
    if turn.status == Turn.Status.COMPLETE:
        return turn, known, None
    first = known.sources[0][0]
    attempt = first if first.kind == Condition.Kind.LLM else None
    return turn, known, reply_claim(turn, timezone.now(), attempt=attempt)


async def reply_events_async(
    turn: Turn, *, settings: ChatSettings | None = None
) -> AsyncIterator[Chunk | Wait | Reset | Done | Failed]:
    """The reply of a pending row as events (see the module doc), for `async for`. Closing it early (a lost
    connection) stops the call and gives the lease back; the row stays pending for the next request."""
    known = None
    waited = False
    while True:
        turn, known, lease = await db_step(_state_claim, turn.pk, known, settings)
        settings = known.settings
        if turn.status == Turn.Status.COMPLETE:
            await _hold_until(reply_earliest(turn, settings))
            yield Done(turn)
            return
        if lease is None:  # another request is producing it: wait for that one (or for its lease to lapse)
            if not waited:
                waited = True
                yield Wait("Your reply is on its way.")
            await asyncio.sleep(POLL)
            continue
        finished = False
        try:
            # aclosing: a reader gone mid-reply closes the call now (stored as abandoned), before the lease is given
            # back, rather than whenever the abandoned generator is collected.
            async with aclosing(_produce(turn, known, lease)) as events:
                async for event in events:
                    if isinstance(event, _Outcome):
                        finished = event.value
                    else:
                        yield event
        finally:
            await asyncio.shield(db_step(lease.release))
        if finished:
            return
        # The lease was lost to another request (this one was too slow): its reply is the one to show.


async def _produce(turn: Turn, known: _Reply, lease: Lease) -> AsyncIterator:
    """Asks each source in turn (the first one's attempt was counted with the lease); last an _Outcome: True once
    the reply is Done (or closed by a spending limit) or Failed, False when the lease was lost."""
    shown_any = False
    limited: _Limited | None = None
    for attempt, (condition, is_fallback) in enumerate(known.sources):
        if limited is not None and not is_fallback:
            continue  # the source's retry would be refused by the same budget
        if attempt:
            if shown_any:
                yield Reset()
                shown_any = False
            yield Wait()
        closes = Turn.CLOSE_REASONS[limited.reason] if limited else ""  # the fallback's reply ends it
        step = (
            reply_call(turn, known, lease, condition, is_fallback, counted=not attempt, closes=closes)
            if condition.kind == Condition.Kind.LLM
            else _person_wait(turn, known.settings, lease)
        )
        outcome = None
        async with aclosing(step) as events:
            async for event in events:
                if isinstance(event, _Outcome):
                    outcome = event.value
                else:
                    yield event
        if isinstance(outcome, Turn):
            yield Done(outcome)
            yield _Outcome(True)
            return
        if isinstance(outcome, _Limited):
            limited = outcome
            if not outcome.fallback_may_answer or is_fallback:
                break
        else:
            shown_any = shown_any or bool(outcome)
        if not await db_step(lease.renew, force=True):
            if shown_any:
                yield Reset()
            yield _Outcome(False)
            return
    if limited is None:
        yield Failed()
        yield _Outcome(True)
        return
    closed = await db_step(reply_close, turn, lease, reason=limited.reason)
    if closed is not None:  # None: the lease was lost, the other request's reply is the one to show
        yield Done(closed)
    yield _Outcome(closed is not None)


def person_wait_text(settings: ChatSettings) -> str:
    """The participant's stated wait while a person source writes: the time limit a reply, in words that do not
    say who writes (the label shown is the other factor)."""
    seconds = settings.person_reply_seconds
    limit = (
        f"{seconds // 60} minute{'s' if seconds >= 120 else ''}"
        if seconds % 60 == 0
        else f"{seconds} seconds"
    )
    return f"Your reply is taking a little longer. It can take up to {limit}; please keep this page open."


async def _person_wait(turn: Turn, settings: ChatSettings, lease: Lease) -> AsyncIterator:
    """A person source: the responder console completes the row (`reply_complete`); last an _Outcome: the
    completed row, or None past the study's time limit a reply or when the lease was lost (the fallback
    answers)."""
    deadline = turn.sent_at + timedelta(seconds=settings.person_reply_seconds)
    yield Wait("Your reply is on its way.")  # the same words for every source: the label alone says who
    stated = False
    while timezone.now() < deadline:
        fresh = await db_step(Turn.objects.get, pk=turn.pk)
        if fresh.status == Turn.Status.COMPLETE:
            await _hold_until(reply_earliest(fresh, settings))
            yield _Outcome(fresh)
            return
        if lease.due() and not await db_step(lease.renew):
            break
        if not stated and timezone.now() - turn.sent_at >= STATED_WAIT_AFTER:
            stated = True  # a reply this slow: the participant is told how long it may take at most
            yield Wait(person_wait_text(settings))
        await asyncio.sleep(POLL)
    yield _Outcome(None)


def _attempt_count(turn: Turn, condition: Condition) -> None:
    Turn.objects.filter(pk=turn.pk).update(attempts=F("attempts") + 1, condition=condition)


def _attempt_failed(turn_id: int, error: str, live_call_id) -> None:
    Turn.objects.filter(pk=turn_id).update(error=error[:2000], live_call=live_call_id)


async def reply_call(
    turn: Turn,
    known: _Reply,
    lease: Lease,
    condition: Condition,
    is_fallback: bool,
    *,
    counted=False,
    closes="",
) -> AsyncIterator:
    """One provider call for the row: its Chunks (held back until the minimum wait has passed), then last an
    _Outcome: the completed Turn, whether any text was shown before it failed, or _Limited when a spending limit
    refused it (nothing sent). `counted`: the attempt was counted already (with the lease). `closes`: the reply
    ends the conversation, for that reason (Conversation.closed_by)."""
    conversation, settings = known.conversation, known.settings
    if not counted:
        await db_step(_attempt_count, turn, condition)
    context = {
        "participant": conversation.participant_id,
        "conversation": conversation.pk,
        "turn": turn.index,
    }
    earliest = reply_earliest(turn, settings)
    study = conversation.participant.study
    screen = ReplyScreen(sentences=settings.moderation_provider_id is not None)
    held: list[str] = []
    shown = False
    first_token_at = None
    reply = None
    try:
        reply = await live_respond_async(condition=condition, messages=known.messages, context=context)
        async for text in reply:
            if first_token_at is None:
                first_token_at = timezone.now()
            held.append(screen.add(text))
            due = screen.sentence_due()
            if due is not None:  # moderation: the reply up to its last sentence end, before that is shown
                verdict = await db_step(
                    message_check, screen.text[:due], study=study, role=Turn.Role.RESPONDER
                )
                held.append(screen.sentence_checked(due, verdict))
            if timezone.now() >= earliest and any(held):
                yield Chunk("".join(held))
                held.clear()
                shown = True
            if lease.due() and not await db_step(lease.renew):
                await reply.aclose()
                yield _Outcome(shown)  # the lease lapsed and another request took the row over
                return
    except (GeneratorExit, asyncio.CancelledError):
        if reply is not None:
            await reply.aclose()
        raise
    except (BudgetSpent, TokenCapReached) as exc:  # refused before anything was sent: no call is stored
        await db_step(_attempt_failed, turn.pk, f"{type(exc).__name__}: {exc}", None)
        yield _Outcome(_Limited(exc.kind, fallback_may_answer=isinstance(exc, BudgetSpent)))
        return
    except Exception as exc:  # a provider's error, the limiter's wait, no responder: the next source tries
        record = getattr(reply, "record", None)
        await db_step(_attempt_failed, turn.pk, f"{type(exc).__name__}: {exc}", getattr(record, "pk", None))
        yield _Outcome(shown)
        return
    args = (turn, lease, reply, first_token_at, condition, is_fallback)
    completed = await db_step(reply_complete_llm, *args, closes=closes, verdict=screen.verdict)
    if completed is None:
        yield _Outcome(shown)
        return
    await _hold_until(earliest)
    if reply_withheld(completed):
        if shown:
            yield Reset()  # the words shown so far are dropped: the reply is replaced
    else:
        held.append(screen.rest())
        if any(held):
            yield Chunk("".join(held))
    yield _Outcome(completed)


def reply_complete_llm(
    turn, lease, reply, first_token_at, condition, is_fallback, *, closes="", verdict: dict | None = None
) -> Turn | None:
    """Stores a model's finished reply in the pending row, while `lease` is held (None: it was not); `closes`: the
    conversation ends with it, for that reason. Its safety check runs on the whole reply unless `verdict` is the
    check that flagged it while it streamed; a flagged reply is stored withheld (kinds/chat/safety.py
    `reply_verdict_apply`)."""
    record = reply.record
    fields = {
        **reply_config_fields(condition),
        "status": Turn.Status.COMPLETE,
        "text": reply.text,
        "first_token_at": first_token_at,
        "completed_at": timezone.now(),
        "finish_reason": getattr(reply, "finish_reason", ""),
        "input_tokens": getattr(reply, "usage_in", None),
        "output_tokens": getattr(reply, "usage_out", None),
        "cost": getattr(reply, "cost", Decimal(0)) or Decimal(0),
        "live_call_id": getattr(record, "pk", None),
        "claimed_until": None,
    }
    if record is not None:
        fields["prompt"] = record.request
        fields["model"] = record.model_returned or record.model_requested
    conversation = turn.conversation
    verdict = verdict or message_check(
        fields["text"], study=conversation.participant.study, role=Turn.Role.RESPONDER
    )
    crisis = reply_verdict_apply(fields, verdict)
    return reply_row_complete(
        turn, fields, lease=lease, fallback=is_fallback, closed_by=closes, crisis=crisis
    )


# --- the sync reader ------------------------------------------------------------------------------------------


def reply_events(
    turn: Turn, *, settings: ChatSettings | None = None
) -> Iterator[Chunk | Wait | Reset | Done | Failed]:
    """reply_events_async for a sync caller (a WSGI server, the form post without JavaScript): the same generator
    driven on the process's reply loop, an event loop in a thread of its own; closing this iterator closes it
    (the call stopped, the lease given back) before close() returns."""
    return _driven(reply_events_async(turn, settings=settings))


_REPLY_LOOP: list[tuple[int, asyncio.AbstractEventLoop]] = []
_REPLY_LOOP_LOCK = threading.Lock()
_END = object()


def _reply_loop() -> asyncio.AbstractEventLoop:
    """The process's reply loop, started on first use (and again in a forked child: threads do not survive)."""
    with _REPLY_LOOP_LOCK:
        if not _REPLY_LOOP or _REPLY_LOOP[0][0] != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="chat-replies", daemon=True).start()
            _REPLY_LOOP[:] = [(os.getpid(), loop)]
        return _REPLY_LOOP[0][1]


async def _next(events: AsyncIterator):
    try:
        return await events.__anext__()
    except StopAsyncIteration:
        return _END


def _driven(events) -> Iterator:
    loop = _reply_loop()

    def step(coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    try:
        while (event := step(_next(events))) is not _END:
            yield event
    finally:
        step(events.aclose())
