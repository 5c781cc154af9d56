"""Respond now: a model's reply asked for from a participant's request (a live conversation), streamed.

`respond_now(config=..., messages=...)` returns a `LiveReplyStream`: iterate it for the reply's text chunks as the
provider produces them; once it is exhausted (or closed by a reader that stops early), `record` is the stored
LiveCall and `finish_reason`, `usage_in`, `usage_out`, `cost` are set. Guarantees:

* **outside any transaction**: refused (`LiveCallInTransaction`, nothing sent, nothing written) inside
  `transaction.atomic` — a call that waits seconds on the network must not hold row locks or a connection's
  transaction open; its one write, the LiveCall row, is a single autocommitted INSERT after the reply ends;
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

The participant path reaches this through studies/live.py (`live_respond`), registered by generation/apps.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal

from django.db import connection
from django.utils import timezone

from generation.live_models import LiveCall
from generation.models import LLMConditionConfig
from generation.providers.base import (
    LimiterWait,
    ProviderError,
    Reply,
    TransientProviderError,
    cost_compute,
    tokens_estimate,
)
from generation.providers.call import provider_api_key, provider_request_build
from generation.providers.registry import adapter_for
from generation.ratelimit import RateLimitWait, limit_spec_for, limiter_acquire, limiter_release
from studies.models import Condition

LIVE_TIMEOUT_MAX = 60.0  # seconds: a person is waiting
LIVE_MAX_WAIT = 2.0  # seconds the limiter may make a participant's request wait before refusing


class LiveCallInTransaction(RuntimeError):
    """respond_now was called inside a database transaction."""


class LiveReplyStream:
    """The streamed reply (see the module doc): iterate once for its text chunks."""

    def __init__(self, chunks: Iterator[str]):
        self._chunks = chunks
        self.text = ""
        self.finish_reason = ""
        self.usage_in: int | None = None
        self.usage_out: int | None = None
        self.cost = Decimal(0)
        self.record: LiveCall | None = None

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
    transaction; iterating raises LimiterWait when the provider's limits do not admit the call within `max_wait`
    (nothing sent and nothing stored, either way) and a provider's classified error after the call is stored."""
    if connection.in_atomic_block:
        raise LiveCallInTransaction(
            "respond_now waits on the network: call it outside any transaction (not inside transaction.atomic)"
        )
    provider = config.provider
    timeout = min(float(timeout or provider.timeout_seconds), LIVE_TIMEOUT_MAX)
    params = {"temperature": config.temperature, "top_p": config.top_p, "max_tokens": config.max_tokens,
              "seed": config.seed}  # fmt: skip
    body = provider_request_build(
        provider=provider, model=config.model, system=config.system_prompt, messages=messages, params=params
    )
    api_key = provider_api_key(provider)
    estimate = tokens_estimate(system=config.system_prompt, messages=messages, max_tokens=config.max_tokens)
    reply = LiveReplyStream(iter(()))
    reply._chunks = _streamed(
        reply, config=config, body=body, api_key=api_key, timeout=timeout, context=context or {},
        estimate=estimate, max_wait=max_wait,
    )  # fmt: skip
    return reply


def _streamed(
    reply: LiveReplyStream, *, config, body, api_key, timeout, context, estimate, max_wait
) -> Iterator[str]:
    """The chunks: the limiter's lease taken when the reader asks for the first one (LimiterWait then, nothing
    sent or stored), given back and the call stored however the iteration ends."""
    provider = config.provider
    if connection.in_atomic_block:
        raise LiveCallInTransaction(
            "the reply is read inside a transaction: read it outside transaction.atomic"
        )
    try:
        lease = limiter_acquire(spec=limit_spec_for(provider), tokens=estimate, max_wait=max_wait)
    except RateLimitWait as wait:
        raise LimiterWait(wait.retry_after) from None
    started_at, started = timezone.now(), time.monotonic()
    first_chunk_ms = None
    end: Reply | None = None
    raw = None
    failure: ProviderError | None = None
    parts: list[str] = []
    try:
        for chunk in adapter_for(provider).stream(
            provider=provider, api_key=api_key, body=body, timeout=timeout
        ):
            if chunk.end is not None:
                end, raw = chunk.end, chunk.raw
                continue
            if first_chunk_ms is None:
                first_chunk_ms = int((time.monotonic() - started) * 1000)
            elif time.monotonic() - started - first_chunk_ms / 1000 > 2 * timeout:
                raise TransientProviderError(
                    "timeout", f"the reply did not end within {2 * timeout:g}s of its start"
                )
            parts.append(chunk.text)
            yield chunk.text
    except ProviderError as exc:
        failure = exc
        raise
    finally:
        reply.text = "".join(parts)
        if end is not None:
            reply.finish_reason, reply.usage_in, reply.usage_out = (
                end.finish_reason,
                end.usage_in,
                end.usage_out,
            )
            reply.cost = cost_compute(provider=provider, usage_in=end.usage_in, usage_out=end.usage_out)
        used = None if end is None or end.usage_in is None else int(end.usage_in) + int(end.usage_out or 0)
        limiter_release(lease=lease, actual_tokens=used)
        reply.record = _store(
            reply, config=config, body=body, raw=raw, end=end, failure=failure, context=context,
            started_at=started_at, latency_ms=int((time.monotonic() - started) * 1000), first_chunk_ms=first_chunk_ms,
        )  # fmt: skip


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
        provider_name=provider.name,
        provider_kind=provider.kind,
        base_url=provider.base_url,
        model_requested=config.model,
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
