"""Respond now: a model's reply asked for from a participant's request (a live conversation), streamed.

`respond_now(config=..., messages=...)` returns a `LiveReplyStream`: iterate it for the reply's text chunks as the
provider produces them; once it is exhausted (or closed by a reader that stops early), `record` is the stored
LiveCall and `finish_reason`, `usage_in`, `usage_out`, `cost` are set. Guarantees:

* **outside any transaction**: refused (`LiveCallInTransaction`, nothing sent, nothing written) inside
  `transaction.atomic` — a call that waits seconds on the network must not hold row locks or a connection's
  transaction open; its one write, the LiveCall row, is a single autocommitted INSERT after the reply ends
  (and, when the study has spending limits, its reservation: one short locking transaction before the call and
  one after, generation/budget.py);
* **the study's limits**: the call's maximum cost and tokens reserved against the study's budget and the
  participant's token cap before anything is sent (BudgetSpent / TokenCapReached otherwise, nothing sent or
  stored), settled with the reported usage after;
* **a timeout**: `timeout` seconds (default: the provider's, at most LIVE_TIMEOUT_MAX) for the reply to start
  and for each chunk after, and twice that for the rest of the reply once it has started;
* **the provider's limits**: the cross-worker limiter (generation/ratelimit.py) admits the call when the reader
  asks for the first chunk or, when it would wait longer than `max_wait` (short: a person is waiting), raises
  LimiterWait with nothing sent or stored;
* **cost and provenance**: the exact request body, the model and id returned, the finish reason, the usage and
  its cost at the provider's prices, the text, the latency to the first chunk and to the end, or the classified
  error (HTTP status, retry-after), stored for every call, failed ones included;
* **no retries**: a 429, a 5xx or a timeout is raised as the classified TransientProviderError (with
  `retry_after` when the provider gave one) for the page to offer "try again"; generation's one retry loop is
  for batch rows (generation/services/running.py), not for a person waiting.

`respond_now_async` is the same call for an async view (`async for` its chunks): the rules above are one
implementation (`_Call`) read by a sync and an async loop; the provider is read through the SDKs' async clients,
so an ASGI process serves many open conversations at once.

The participant path reaches this through studies/live.py (`live_respond`, `live_respond_async`), registered by
generation/apps.py.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal

from django.db import close_old_connections, connection
from django.utils import timezone

from generation.budget import budget_reserve, budget_settle, call_maximum
from generation.live_models import LiveCall
from generation.models import LLMConditionConfig
from generation.providers.base import (
    LimiterWait,
    ProviderError,
    Reply,
    StreamChunk,
    TransientProviderError,
    cost_compute,
)
from generation.providers.call import provider_api_key, provider_request_build
from generation.providers.registry import adapter_for
from generation.ratelimit import RateLimitWait, limit_spec_for, limiter_acquire, limiter_release
from studies.models import Condition

LIVE_TIMEOUT_MAX = 60.0  # seconds: a person is waiting
LIVE_MAX_WAIT = 2.0  # seconds the limiter may make a participant's request wait before refusing


class LiveCallInTransaction(RuntimeError):
    """respond_now was called inside a database transaction."""


class _Reply:
    """What a reply says once read (see the module doc)."""

    def __init__(self) -> None:
        self.text = ""
        self.finish_reason = ""
        self.usage_in: int | None = None
        self.usage_out: int | None = None
        self.cost = Decimal(0)
        self.record: LiveCall | None = None


class LiveReplyAsyncStream(_Reply):
    """The streamed reply of respond_now_async: `async for` its text chunks once."""

    _chunks: AsyncIterator[str]

    def __aiter__(self) -> AsyncIterator[str]:
        return self._chunks

    async def aclose(self) -> None:
        """Stop reading (the call is stored as abandoned when it had not ended)."""
        await self._chunks.aclose()


class LiveReplyStream(_Reply):
    """The streamed reply (see the module doc): iterate once for its text chunks."""

    def __init__(self, chunks: Iterator[str]):
        super().__init__()
        self._chunks = chunks

    def __iter__(self) -> Iterator[str]:
        return self._chunks

    def close(self) -> None:
        """Stop reading (the call is stored as abandoned when it had not ended)."""
        self._chunks.close()


def respond_now(
    *,
    config: LLMConditionConfig,
    messages: list[dict],
    context: dict | None = None,
    timeout: float | None = None,
    max_wait: float = LIVE_MAX_WAIT,
) -> LiveReplyStream:
    """The reply of `config`'s model (its provider, model, decoding settings and system prompt) to `messages`,
    streamed; `context` (JSON) says who asked and is stored with the call. Raises LiveCallInTransaction inside a
    transaction; iterating raises LimiterWait when the provider's limits do not admit the call within `max_wait`,
    BudgetSpent / TokenCapReached when the study's limits do not (nothing sent and nothing stored, either way) and
    a provider's classified error after the call is stored."""
    _outside_transaction()
    reply = LiveReplyStream(iter(()))
    reply._chunks = _streamed(_Call(reply, config=config, messages=messages, context=context, timeout=timeout,
                                    max_wait=max_wait))  # fmt: skip
    return reply


async def respond_now_async(
    *,
    config: LLMConditionConfig,
    messages: list[dict],
    context: dict | None = None,
    timeout: float | None = None,
    max_wait: float = LIVE_MAX_WAIT,
) -> LiveReplyAsyncStream:
    """respond_now for an async view (an ASGI server serving many open conversations with few processes): the
    same call, the same guarantees and the same stored row; iterate it with `async for`. Its database and limiter
    steps run in a thread of the loop's pool (`db_step`), so an open conversation holds no connection while it
    waits on the provider. `config` must come with its provider and condition (select_related)."""
    reply = LiveReplyAsyncStream()
    call = _Call(reply, config=config, messages=messages, context=context, timeout=timeout, max_wait=max_wait)
    reply._chunks = _astreamed(call)
    return reply


def _begun_async(config_of, *, messages, context, timeout, max_wait=LIVE_MAX_WAIT) -> LiveReplyAsyncStream:
    """respond_now_async with the call begun here (in a worker thread): `config_of()` read, then the budget and
    the limiter, in one step before anything is sent, so a reply's first token waits for one thread hop."""
    config = config_of()
    reply = LiveReplyAsyncStream()
    call = _Call(reply, config=config, messages=messages, context=context, timeout=timeout, max_wait=max_wait)
    call.begin()
    reply._chunks = _astreamed(call, begun=True)
    return reply


def _outside_transaction() -> None:
    if connection.in_atomic_block:
        raise LiveCallInTransaction(
            "respond_now waits on the network: call it outside any transaction (not inside transaction.atomic)"
        )


class _Call:
    """One call's rules, shared by the sync and the async reader: `begin` (budget, then limiter: nothing sent or
    stored when either refuses), `take` (each chunk: the timing, the timeout), `finish` (lease given back, budget
    settled, the row stored), however the reading ends."""

    def __init__(self, reply, *, config, messages, context, timeout, max_wait):
        provider = config.provider
        self.reply, self.config, self.context, self.max_wait = reply, config, context or {}, max_wait
        self.timeout = min(float(timeout or provider.timeout_seconds), LIVE_TIMEOUT_MAX)
        params = {"temperature": config.temperature, "top_p": config.top_p, "max_tokens": config.max_tokens,
                  "seed": config.seed}  # fmt: skip
        self.body = provider_request_build(
            provider=provider,
            model=config.model,
            system=config.system_prompt,
            messages=messages,
            params=params,
        )
        self.api_key = provider_api_key(provider)
        self.maximum = call_maximum(
            provider=provider, system=config.system_prompt, messages=messages, max_tokens=config.max_tokens
        )
        self.adapter = adapter_for(provider)
        self.lease = self.reservation = None
        self.end: Reply | None = None
        self.raw = None
        self.failure: ProviderError | None = None
        self.parts: list[str] = []
        self.first_chunk_ms: int | None = None

    def begin(self) -> None:
        if connection.in_atomic_block:
            raise LiveCallInTransaction(
                "the reply is read inside a transaction: read it outside transaction.atomic"
            )
        participant = str(self.context.get("participant", ""))[:64]
        self.reservation = budget_reserve(
            study_id=self.config.condition.study_id, participant=participant, maximum=self.maximum
        )
        try:
            self.lease = limiter_acquire(
                spec=limit_spec_for(self.config.provider), tokens=self.maximum.tokens, max_wait=self.max_wait
            )
        except RateLimitWait as wait:
            budget_settle(self.reservation, cost=Decimal(0), tokens=0)  # nothing was sent
            raise LimiterWait(wait.retry_after) from None
        self.started_at, self.started = timezone.now(), time.monotonic()

    def take(self, chunk: StreamChunk) -> str | None:
        """The text to pass on, or None (the chunk that ends the reply)."""
        if chunk.end is not None:
            self.end, self.raw = chunk.end, chunk.raw
            return None
        elapsed = time.monotonic() - self.started
        if self.first_chunk_ms is None:
            self.first_chunk_ms = int(elapsed * 1000)
        elif elapsed - self.first_chunk_ms / 1000 > 2 * self.timeout:
            raise TransientProviderError(
                "timeout", f"the reply did not end within {2 * self.timeout:g}s of its start"
            )
        self.parts.append(chunk.text)
        return chunk.text

    def finish(self) -> None:
        reply, end, provider = self.reply, self.end, self.config.provider
        reply.text = "".join(self.parts)
        if end is not None:
            reply.finish_reason, reply.usage_in, reply.usage_out = (
                end.finish_reason,
                end.usage_in,
                end.usage_out,
            )
            reply.cost = cost_compute(provider=provider, usage_in=end.usage_in, usage_out=end.usage_out)
        used = None if end is None or end.usage_in is None else int(end.usage_in) + int(end.usage_out or 0)
        limiter_release(lease=self.lease, actual_tokens=used)
        # Unknown usage (a cut or failed stream) keeps the call's maximum as spent: the provider may bill it.
        budget_settle(self.reservation, cost=reply.cost if used is not None else None, tokens=used)
        reply.record = _store(
            reply, config=self.config, body=self.body, raw=self.raw, end=end, failure=self.failure,
            context=self.context, started_at=self.started_at,
            latency_ms=int((time.monotonic() - self.started) * 1000), first_chunk_ms=self.first_chunk_ms,
        )  # fmt: skip


def _streamed(call: _Call) -> Iterator[str]:
    """The chunks: the call begun when the reader asks for the first one, finished however the iteration ends."""
    call.begin()
    try:
        for chunk in call.adapter.stream(
            provider=call.config.provider, api_key=call.api_key, body=call.body, timeout=call.timeout
        ):
            text = call.take(chunk)
            if text is not None:
                yield text
    except ProviderError as exc:
        call.failure = exc
        raise
    finally:
        call.finish()


async def _astreamed(call: _Call, *, begun: bool = False) -> AsyncIterator[str]:
    """_streamed for `async for`: the provider read without a thread, the database and limiter steps in one."""
    if not begun:
        await db_step(call.begin)
    try:
        async for chunk in call.adapter.astream(
            provider=call.config.provider, api_key=call.api_key, body=call.body, timeout=call.timeout
        ):
            text = call.take(chunk)
            if text is not None:
                yield text
    except ProviderError as exc:
        call.failure = exc
        raise
    finally:
        await asyncio.shield(db_step(call.finish))


async def db_step(step, *args, **kwargs):
    """`step(*args, **kwargs)`, database work of an async caller (a live conversation's stream), in a thread of
    the event loop's pool: an open conversation holds none of PostgreSQL's connections while it waits on the
    provider or a person. The pool's threads keep their connections between steps under DB_CONN_MAX_AGE, as a
    request's thread does (Django's rule, applied before and after each step: closed once too old or unusable),
    so a step does not open one each time; a process holds at most one per thread of the pool."""

    def run():
        close_old_connections()
        try:
            return step(*args, **kwargs)
        finally:
            close_old_connections()

    # The loop's pool directly, with the caller's context: asgiref's sync_to_async(thread_sensitive=False) does
    # the same, but building its wrapper on every step cost the event loop 15 % of its samples in bench/chat.py.
    return await asyncio.get_running_loop().run_in_executor(None, contextvars.copy_context().run, run)


def _store(
    reply, *, config, body, raw, end, failure, context, started_at, latency_ms, first_chunk_ms
) -> LiveCall:
    """The call's one row, autocommitted (the caller is outside any transaction)."""
    provider = config.provider
    if failure is not None:
        outcome = LiveCall.Outcome.ERROR
    elif end is None:
        outcome = LiveCall.Outcome.ABANDONED
    else:
        outcome = LiveCall.Outcome.OK
    return LiveCall.objects.create(
        condition_id=config.condition_id,
        context=context,
        **LiveCall.asked(provider, config.model),
        model_returned=end.model_returned if end else "",
        system_fingerprint=end.system_fingerprint if end else "",
        provider_response_id=end.response_id if end else "",
        finish_reason=reply.finish_reason,
        request=body,
        raw_response=raw,
        text=reply.text,
        outcome=outcome,
        error_kind=failure.kind if failure else "",
        error=str(failure) if failure else "",
        http_status=failure.http_status if failure else None,
        retry_after=getattr(failure, "retry_after", None),
        input_tokens=reply.usage_in,
        output_tokens=reply.usage_out,
        cost=reply.cost,
        first_chunk_ms=first_chunk_ms,
        latency_ms=latency_ms,
        started_at=started_at,
        finished_at=timezone.now(),
    )


def condition_respond_now(
    *, condition: Condition, messages: list[dict], context: dict, timeout: float | None = None
) -> LiveReplyStream:
    """The responder generation registers for the participant path (studies/live.py): `condition`'s model."""
    config = LLMConditionConfig.objects.select_related("provider").get(condition=condition)
    return respond_now(config=config, messages=messages, context=context, timeout=timeout)


async def condition_respond_now_async(
    *, condition: Condition, messages: list[dict], context: dict, timeout: float | None = None
) -> LiveReplyAsyncStream:
    """condition_respond_now for an async view (studies/live.py's `live_respond_async`): the condition's model
    read and the call begun (the study's limits, the provider's) in one thread step; a refusal (LimiterWait,
    BudgetSpent, TokenCapReached) is raised here, nothing sent or stored."""

    def config_of():
        return LLMConditionConfig.objects.select_related("provider", "condition").get(condition=condition)

    return await db_step(lambda: _begun_async(config_of, messages=messages, context=context, timeout=timeout))
