"""The port through which a participant's request asks a model for a reply at once ("respond now"), for a kind
whose participants talk to a model during the study. The participant path may not import generation (the
architecture's arrows), so generation registers its responder here when it starts (generation/apps.py) and the
kind's page calls `live_respond`; a deployment without generation has no responder and says so.

`live_respond(condition=..., messages=..., context=...)` returns an iterator of text chunks (the reply as it is
streamed) whose `record` is the stored call once the iterator is exhausted or closed: see generation/live.py for
the guarantees (outside any transaction, a timeout, the provider's limits, the study's budget, cost and
provenance stored). `await live_respond_async(...)` is the same for an async view: `async for` its chunks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Protocol

from .models import Condition


class LiveReply(Protocol):
    """What a responder returns: the reply's text chunks as they arrive; once exhausted, `finish_reason`,
    `usage_in`, `usage_out`, `cost` and `record` (the stored call)."""

    def __iter__(self) -> Iterator[str]: ...


class NoResponder(RuntimeError):
    """No app registered a responder (generation is not installed)."""


class LiveReplyAsync(Protocol):
    """What an async responder returns: LiveReply's chunks for `async for`."""

    def __aiter__(self) -> AsyncIterator[str]: ...


_RESPONDER: list[Callable[..., LiveReply]] = []
_ASYNC_RESPONDER: list[Callable[..., Awaitable[LiveReplyAsync]]] = []


def live_responder_register(
    responder: Callable[..., LiveReply],
    *,
    asynchronous: Callable[..., Awaitable[LiveReplyAsync]] | None = None,
) -> None:
    """Called once by generation's AppConfig.ready; registering again replaces."""
    _RESPONDER[:] = [responder]
    _ASYNC_RESPONDER[:] = [asynchronous] if asynchronous else []


def live_respond(
    *,
    condition: Condition,
    messages: list[dict],
    context: dict[str, Any] | None = None,
    timeout: float | None = None,
) -> LiveReply:
    """The reply of `condition`'s model to `messages` ([{"role": "user" | "assistant", "content": ...}]), streamed.
    `context`: who asked, stored with the call (e.g. {"participant": pk, "turn": 3})."""
    if not _RESPONDER:
        raise NoResponder("no model can answer now: the generation app is not installed")
    return _RESPONDER[0](condition=condition, messages=messages, context=context or {}, timeout=timeout)


async def live_respond_async(
    *,
    condition: Condition,
    messages: list[dict],
    context: dict[str, Any] | None = None,
    timeout: float | None = None,
) -> LiveReplyAsync:
    """live_respond for an async view: `async for` the chunks of the returned reply."""
    if not _ASYNC_RESPONDER:
        raise NoResponder("no model can answer now: the generation app is not installed")
    return await _ASYNC_RESPONDER[0](
        condition=condition, messages=messages, context=context or {}, timeout=timeout
    )
