"""One call to an LLM provider, classified: the only place in the project that talks to providers.

Reuse it anywhere a model must be asked something (pre-generating responses, EmotionBench's LLM subjects)::

    from generation.providers import provider_complete, TransientProviderError, PermanentProviderError

    completion = provider_complete(
        provider=provider,                  # a generation.models.Provider row
        model="gpt-4o-2024-08-06",
        system="You are ...",               # optional
        messages=[{"role": "user", "content": "..."}],
        params={"temperature": 0, "max_tokens": 200, "seed": 7, "top_p": None},
    )
    completion.text, completion.finish_reason, completion.usage_in, completion.usage_out, completion.cost

Guarantees:

* The key is read from the environment variable the provider names, at call time. It is never returned, logged,
  or put in `Completion.request` / `raw_response` (those are bodies, not headers).
* The provider's requests-per-minute, tokens-per-minute and concurrency limits are respected across every
  process and worker (see generation.ratelimit); `rate_limit=False` skips this (one-off checks only).
* The SDKs' own retries are off: every failure comes back as exactly one of
  - TransientProviderError(kind, retry_after): worth retrying later — timeout, connection error, 429 (with the
    Retry-After it sent, if any), 5xx/529 overloaded, a malformed or empty body, or our own limiter asking to wait
    (`RateLimitWait`, a subclass: no request was sent);
  - PermanentProviderError(kind, reason): retrying cannot help — 400 bad request, 401/403 bad key, 404 model not
    served, context too long, content filter/refusal, quota exhausted, key variable not set.
  The caller decides how often to retry (generation.services uses the provider's max_attempts, exponential backoff
  with jitter, and honours retry_after).
* No database access here, so it is safe (and required) to call outside any transaction.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from generation.ratelimit import RateLimitWait, limit_spec_for, limiter_acquire, limiter_release

logger = logging.getLogger(__name__)


class ProviderError(Exception):
    def __init__(self, kind: str, message: str, *, http_status: int | None = None, raw: Any = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.http_status = http_status
        self.raw = raw

    def __str__(self) -> str:
        status = f"HTTP {self.http_status}: " if self.http_status else ""
        return f"{self.kind}: {status}{self.message}"


class TransientProviderError(ProviderError):
    """Retry later (after `retry_after` seconds when the provider said so)."""

    def __init__(self, kind: str, message: str, *, retry_after: float | None = None, **kw):
        super().__init__(kind, message, **kw)
        self.retry_after = retry_after


class PermanentProviderError(ProviderError):
    """Retrying the same request cannot succeed; `reason` says why in words for the admin and the terminal."""

    @property
    def reason(self) -> str:
        return str(self)


class LimiterWait(TransientProviderError):
    """Our own cross-worker limiter did not admit the request in time; nothing was sent."""

    def __init__(self, retry_after: float):
        super().__init__("rate_limit_wait", f"waiting for the provider's limits ({retry_after:.1f}s)")
        self.retry_after = retry_after


@dataclass(frozen=True)
class Completion:
    text: str
    finish_reason: str
    model_returned: str
    system_fingerprint: str
    response_id: str
    usage_in: int | None
    usage_out: int | None
    request: dict
    raw_response: dict
    latency_ms: int
    http_status: int
    cost: Decimal = Decimal(0)
    headers: dict = field(default_factory=dict)

    @property
    def truncated(self) -> bool:
        """The model stopped because it hit max_tokens (OpenAI "length", Anthropic "max_tokens")."""
        return self.finish_reason in {"length", "max_tokens", "model_length"}


# --- request bodies -----------------------------------------------------------------------------------------


def provider_request_build(*, kind: str, model: str, system: str, messages: list[dict], params: dict) -> dict:
    """The exact request body sent for a kind of provider (stored verbatim in provenance)."""
    params = {k: v for k, v in (params or {}).items() if v is not None}
    if kind == "anthropic":
        body: dict[str, Any] = {"model": model, "max_tokens": int(params.get("max_tokens") or 1024)}
        if system:
            body["system"] = system
        body["messages"] = list(messages)
        for name in ("temperature", "top_p", "stop_sequences"):
            if name in params:
                body[name] = params[name]
        # Anthropic has no seed parameter: it is recorded in provenance by the caller, not sent.
        return body
    body = {
        "model": model,
        "messages": ([{"role": "system", "content": system}] if system else []) + list(messages),
    }
    for name in ("temperature", "top_p", "max_tokens", "seed", "stop"):
        if name in params:
            body[name] = params[name]
    return body


def tokens_estimate(*, system: str, messages: list[dict], max_tokens: int | None) -> int:
    """A cautious token count for the limiter and the cost estimate: ~4 characters per token plus overhead."""
    chars = len(system or "") + sum(len(str(m.get("content", ""))) for m in messages)
    return chars // 4 + 8 * (len(messages) + 1) + int(max_tokens or 256)


def cost_compute(*, provider, usage_in: int | None, usage_out: int | None) -> Decimal:
    million = Decimal(1_000_000)
    price_in = Decimal(str(provider.price_input_per_million))
    price_out = Decimal(str(provider.price_output_per_million))
    return Decimal(usage_in or 0) * price_in / million + Decimal(usage_out or 0) * price_out / million


# --- clients ------------------------------------------------------------------------------------------------

_clients: dict[tuple, Any] = {}
_clients_lock = threading.Lock()


def provider_api_key(provider) -> str:
    """The key from the environment variable the provider names; PermanentProviderError if it is not set."""
    value = os.environ.get(provider.api_key_env, "")
    if not value:
        raise PermanentProviderError(
            "missing_key",
            f"the environment variable {provider.api_key_env} (API key of provider {provider.name}) is not set",
        )
    return value


def _client(provider, api_key: str):
    key = (provider.kind, provider.base_url or "", api_key, float(provider.timeout_seconds))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            options = {"api_key": api_key, "timeout": float(provider.timeout_seconds), "max_retries": 0}
            if provider.base_url:
                options["base_url"] = provider.base_url
            if provider.kind == "anthropic":
                import anthropic

                client = anthropic.Anthropic(**options)
            else:
                import openai

                client = openai.OpenAI(**options)
            _clients[key] = client
        return client


# --- classification -----------------------------------------------------------------------------------------


def _retry_after(headers) -> float | None:
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(parsed.timestamp() - time.time(), 0.0)


_CONTEXT_MARKERS = (
    "context_length",
    "context length",
    "maximum context",
    "too many tokens",
    "prompt is too long",
)
_FILTER_MARKERS = (
    "content_filter",
    "content filter",
    "content_policy",
    "content policy",
    "safety",
    "moderation",
)


def _status_error(status: int, body_text: str, headers) -> ProviderError:
    snippet = (body_text or "").strip()[:500]
    lowered = snippet.lower()
    if status == 429:
        if "insufficient_quota" in lowered or "exceeded your current quota" in lowered:
            return PermanentProviderError(
                "quota", f"the account's quota is exhausted: {snippet}", http_status=status
            )
        return TransientProviderError(
            "rate_limited", f"rate limited: {snippet}", retry_after=_retry_after(headers), http_status=status
        )
    if status in (408, 409, 425) or status >= 500:
        return TransientProviderError(
            "server_error" if status >= 500 else "retryable_status",
            f"provider error: {snippet}",
            retry_after=_retry_after(headers),
            http_status=status,
        )
    if status in (401, 403):
        return PermanentProviderError("bad_key", f"the key was refused: {snippet}", http_status=status)
    if status == 404:
        return PermanentProviderError(
            "model_not_found",
            f"the endpoint does not serve this model (or path): {snippet}",
            http_status=status,
        )
    if any(marker in lowered for marker in _CONTEXT_MARKERS):
        return PermanentProviderError(
            "context_too_long", f"the prompt is too long: {snippet}", http_status=status
        )
    if any(marker in lowered for marker in _FILTER_MARKERS):
        return PermanentProviderError(
            "content_filter", f"refused by a content filter: {snippet}", http_status=status
        )
    return PermanentProviderError("bad_request", f"the request was rejected: {snippet}", http_status=status)


def _parse_openai(data: dict) -> tuple[str, str, str, str, str, int | None, int | None]:
    choice = data["choices"][0]
    message = choice.get("message") or {}
    text = message.get("content")
    if isinstance(text, list):  # some compatible servers return content parts
        text = "".join(part.get("text", "") for part in text if isinstance(part, dict))
    usage = data.get("usage") or {}
    return (
        text or "",
        choice.get("finish_reason") or "",
        data.get("model") or "",
        data.get("system_fingerprint") or "",
        data.get("id") or "",
        usage.get("prompt_tokens"),
        usage.get("completion_tokens"),
    )


def _parse_anthropic(data: dict) -> tuple[str, str, str, str, str, int | None, int | None]:
    if data.get("type") == "error":
        raise KeyError("error body with status 200")
    parts = data["content"]
    text = "".join(part.get("text", "") for part in parts if part.get("type") == "text")
    usage = data.get("usage") or {}
    return (
        text,
        data.get("stop_reason") or "",
        data.get("model") or "",
        "",
        data.get("id") or "",
        usage.get("input_tokens"),
        usage.get("output_tokens"),
    )


_signatures: dict[Any, frozenset] = {}


def _accepted_arguments(create) -> frozenset:
    key = getattr(create, "__qualname__", repr(create))
    if key not in _signatures:
        import inspect

        _signatures[key] = frozenset(inspect.signature(create).parameters) - {"extra_body", "extra_headers"}
    return _signatures[key]


def _send(client, provider, body: dict):
    """Send one request; return (status, body text, headers). Raises ProviderError subclasses."""
    if provider.kind == "anthropic":
        import anthropic as sdk

        create = client.messages.with_raw_response.create
    else:
        import openai as sdk

        create = client.chat.completions.with_raw_response.create
    # SDK versions differ in which body fields they take as arguments (newer Anthropic SDKs dropped
    # temperature/top_p): pass what the signature takes, send the rest through extra_body, so the wire body is
    # exactly `body` either way.
    accepted = _accepted_arguments(create)
    direct = {k: v for k, v in body.items() if k in accepted}
    extra = {k: v for k, v in body.items() if k not in accepted}
    try:
        raw = create(**direct, extra_body=extra or None)
    except sdk.APITimeoutError as exc:
        raise TransientProviderError(
            "timeout", f"no reply within {provider.timeout_seconds:g}s ({exc.__class__.__name__})"
        ) from None
    except sdk.APIConnectionError as exc:
        raise TransientProviderError(
            "connection", f"could not reach {provider.base_url or 'the provider'}: {exc}"
        ) from None
    except sdk.APIStatusError as exc:
        raise _status_error(exc.status_code, exc.response.text, exc.response.headers) from None
    http = raw.http_response
    return http.status_code, http.text, http.headers


def completion_checked(
    *,
    provider,
    parsed: tuple,
    request: dict,
    raw_response: dict,
    latency_ms: int,
    http_status: int,
    headers=None,
) -> Completion:
    """The Completion of a parsed reply (`_parse_openai` / `_parse_anthropic`), or the classified error when its
    text is empty (transient) or the provider filtered or refused it (permanent). Cost at the provider's prices.
    Used for synchronous calls and for the lines of a Batch API output alike."""
    reply_text, finish, model_returned, fingerprint, response_id, usage_in, usage_out = parsed
    if not reply_text.strip():
        if finish in {"content_filter", "refusal"}:
            raise PermanentProviderError(
                "content_filter",
                f"the provider filtered the reply (finish reason {finish})",
                http_status=http_status,
            )
        raise TransientProviderError(
            "empty", f"the reply has no text (finish reason {finish or 'none'})", http_status=http_status
        )
    if finish in {"content_filter", "refusal"}:
        raise PermanentProviderError(
            "content_filter",
            f"the provider stopped the reply (finish reason {finish})",
            http_status=http_status,
        )
    kept_headers = {
        k: v
        for k, v in (headers or {}).items()
        if k.lower()
        in {"x-request-id", "request-id", "openai-model", "openai-processing-ms", "anthropic-model"}
    }
    return Completion(
        text=reply_text,
        finish_reason=finish,
        model_returned=model_returned,
        system_fingerprint=fingerprint,
        response_id=response_id,
        usage_in=usage_in,
        usage_out=usage_out,
        request=request,
        raw_response=raw_response,
        latency_ms=latency_ms,
        http_status=http_status,
        cost=cost_compute(provider=provider, usage_in=usage_in, usage_out=usage_out),
        headers=kept_headers,
    )


def provider_complete(
    *,
    provider,
    model: str,
    messages: list[dict],
    system: str = "",
    params: dict | None = None,
    rate_limit: bool = True,
    max_wait: float = 30.0,
) -> Completion:
    """Ask `model` at `provider` once and return the Completion, or raise a classified error (see module doc).

    messages: [{"role": "user" | "assistant", "content": str}, ...]; system: the system prompt (sent as a system
    message to OpenAI-compatible endpoints, as `system` to Anthropic); params: temperature, top_p, max_tokens,
    seed, stop (None values are not sent). With rate_limit, waits for the provider's limits up to max_wait
    seconds, then raises LimiterWait (transient, nothing sent)."""
    params = dict(params or {})
    api_key = provider_api_key(provider)
    body = provider_request_build(
        kind=provider.kind, model=model, system=system, messages=messages, params=params
    )
    lease = None
    if rate_limit:
        estimate = tokens_estimate(system=system, messages=messages, max_tokens=params.get("max_tokens"))
        try:
            lease = limiter_acquire(spec=limit_spec_for(provider), tokens=estimate, max_wait=max_wait)
        except RateLimitWait as wait:
            raise LimiterWait(wait.retry_after) from None
    actual_tokens = None
    try:
        client = _client(provider, api_key)
        started = time.monotonic()
        status, text, headers = _send(client, provider, body)
        latency_ms = int((time.monotonic() - started) * 1000)
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError("the body is not a JSON object")
            parsed = _parse_anthropic(data) if provider.kind == "anthropic" else _parse_openai(data)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise TransientProviderError(
                "malformed",
                f"the reply is not a valid completion ({exc}): {text[:300]!r}",
                http_status=status,
            ) from None
        usage_in, usage_out = parsed[5], parsed[6]
        if usage_in is not None or usage_out is not None:
            actual_tokens = int(usage_in or 0) + int(usage_out or 0)
        completion = completion_checked(
            provider=provider,
            parsed=parsed,
            request=body,
            raw_response=data,
            latency_ms=latency_ms,
            http_status=status,
            headers=headers,
        )
        logger.info(
            "provider call ok",
            extra={
                "provider": provider.name,
                "model": model,
                "latency_ms": latency_ms,
                "finish_reason": completion.finish_reason,
            },
        )
        return completion
    except ProviderError as exc:
        logger.warning(
            "provider call failed",
            extra={
                "provider": provider.name,
                "model": model,
                "error_kind": exc.kind,
                "http_status": exc.http_status,
            },
        )
        raise
    finally:
        if lease is not None:
            limiter_release(lease=lease, actual_tokens=actual_tokens)
