"""What every provider adapter shares: the typed Completion, the classified errors, and the adapter interface.

An adapter speaks one wire format (OpenAI-compatible chat completions, Anthropic messages, …). It builds the exact
request body, sends it, and parses a reply body into a `Reply`; `ProviderAdapter.complete` (shared) turns that into
a `Completion` or a classified error. Adapters whose wire format has a Batch API also implement `BatchAPI`.
No database access here, and nothing here reads keys (the caller passes the key in).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any, ClassVar


class ProviderError(Exception):
    """A failed call. `usage_in` / `usage_out` / `cost`: what the reply said the call used, when the provider
    answered and the answer was then refused (a malformed verdict, an empty text): a failed call is still paid
    for, and spend must count it."""

    def __init__(self, kind: str, message: str, *, http_status: int | None = None, raw: Any = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.http_status = http_status
        self.raw = raw
        self.usage_in: int | None = None
        self.usage_out: int | None = None
        self.cost = Decimal(0)

    def usage_record(self, *, provider, usage_in: int | None, usage_out: int | None) -> None:
        """Attach the usage the reply reported, and its cost at the provider's prices."""
        self.usage_in, self.usage_out = usage_in, usage_out
        self.cost = cost_compute(provider=provider, usage_in=usage_in, usage_out=usage_out)

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
class Reply:
    """A reply body as its adapter reads it (before the empty/refused checks)."""

    text: str
    finish_reason: str = ""
    model_returned: str = ""
    system_fingerprint: str = ""
    response_id: str = ""
    usage_in: int | None = None
    usage_out: int | None = None


@dataclass(frozen=True)
class StreamChunk:
    """One piece of a streamed reply: `text` as it arrives, or, last, `end`: the reply's metadata (finish reason,
    model, id, usage; its `text` left empty) and `raw`, what the provider said about it as JSON."""

    text: str = ""
    end: Reply | None = None
    raw: dict | None = None


@dataclass(frozen=True)
class Moderation:
    """A moderation endpoint's verdict: flagged or not, the categories it flagged, the model that judged."""

    flagged: bool
    categories: tuple[str, ...]
    model: str

    def as_json(self) -> dict:
        return {"flagged": self.flagged, "categories": list(self.categories), "model": self.model}


@dataclass(frozen=True)
class HTTPReply:
    status: int
    text: str
    headers: Any = None


@dataclass(frozen=True)
class Completion:
    """One successful call: the text, why it stopped, the tokens in and out (the cost's inputs) and the cost at
    the provider's prices, the exact request body and the raw reply body (never headers, so never the key)."""

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

    def record_fields(self) -> dict:
        """The columns every stored record of a call shares (ResponseProvenance, QuestionnaireExchange)."""
        return {
            "raw_response": self.raw_response,
            "model_returned": self.model_returned,
            "input_tokens": self.usage_in,
            "output_tokens": self.usage_out,
            "cost": self.cost,
            "latency_ms": self.latency_ms,
        }

    @property
    def truncated(self) -> bool:
        """The model stopped because it hit max_tokens (OpenAI "length", Anthropic "max_tokens")."""
        return self.finish_reason in TRUNCATED_REASONS


TRUNCATED_REASONS = frozenset({"length", "max_tokens", "model_length"})
_REFUSED_REASONS = frozenset({"content_filter", "refusal"})
_KEPT_HEADERS = frozenset(
    {"x-request-id", "request-id", "openai-model", "openai-processing-ms", "anthropic-model"}
)


def _count(value) -> int | None:
    """A token count from a reply body: a non-negative whole number, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return int(value)


def tokens_estimate(*, system: str, messages: list[dict], max_tokens: int | None) -> int:
    """A cautious token count for the limiter and the cost estimate: ~4 characters per token plus overhead."""
    chars = len(system or "") + sum(len(str(m.get("content", ""))) for m in messages)
    return chars // 4 + 8 * (len(messages) + 1) + int(max_tokens or 256)


def cost_compute(*, provider, usage_in: int | None, usage_out: int | None) -> Decimal:
    million = Decimal(1_000_000)
    price_in = Decimal(str(provider.price_input_per_million))
    price_out = Decimal(str(provider.price_output_per_million))
    return Decimal(usage_in or 0) * price_in / million + Decimal(usage_out or 0) * price_out / million


# --- classification -----------------------------------------------------------------------------------------


def retry_after_seconds(headers) -> float | None:
    """The wait a provider asked for (retry-after-ms, or retry-after in seconds or as an HTTP date)."""
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


def status_error(status: int, body_text: str, headers=None) -> ProviderError:
    """The classified error of a non-2xx reply (the same rules for every wire format and for batch lines)."""
    snippet = (body_text or "").strip()[:500]
    lowered = snippet.lower()
    if status == 429:
        if "insufficient_quota" in lowered or "exceeded your current quota" in lowered:
            return PermanentProviderError(
                "quota", f"the account's quota is exhausted: {snippet}", http_status=status
            )
        return TransientProviderError(
            "rate_limited",
            f"rate limited: {snippet}",
            retry_after=retry_after_seconds(headers),
            http_status=status,
        )
    if status in (408, 409, 425) or status >= 500:
        return TransientProviderError(
            "server_error" if status >= 500 else "retryable_status",
            f"provider error: {snippet}",
            retry_after=retry_after_seconds(headers),
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


def completion_checked(
    *,
    provider,
    reply: Reply,
    request: dict,
    raw_response: dict,
    latency_ms: int,
    http_status: int,
    headers=None,
) -> Completion:
    """The Completion of a parsed reply, or the classified error when its text is empty (transient) or the
    provider filtered or refused it (permanent). Cost at the provider's prices. Used for synchronous calls and
    for the lines of a Batch API output alike."""
    finish = reply.finish_reason
    if not reply.text.strip():
        if finish in _REFUSED_REASONS:
            raise PermanentProviderError(
                "content_filter",
                f"the provider filtered the reply (finish reason {finish})",
                http_status=http_status,
            )
        raise TransientProviderError(
            "empty", f"the reply has no text (finish reason {finish or 'none'})", http_status=http_status
        )
    if finish in _REFUSED_REASONS:
        raise PermanentProviderError(
            "content_filter",
            f"the provider stopped the reply (finish reason {finish})",
            http_status=http_status,
        )
    kept = {k: v for k, v in (headers or {}).items() if k.lower() in _KEPT_HEADERS}
    cost = cost_compute(provider=provider, usage_in=reply.usage_in, usage_out=reply.usage_out)
    call = {
        "request": request,
        "raw_response": raw_response,
        "latency_ms": latency_ms,
        "http_status": http_status,
    }
    return Completion(**asdict(reply), **call, cost=cost, headers=kept)  # the fields of the reply as read


# --- the interface ------------------------------------------------------------------------------------------


class ProviderAdapter(ABC):
    """One wire format. Subclasses implement the three abstract methods and are registered once
    (generation.providers.registry.adapter_register) under the Provider.kind they serve."""

    kind: ClassVar[str]  # Provider.kind it serves
    label: ClassVar[str]  # what the admin's form calls it

    @abstractmethod
    def request_build(self, *, model: str, system: str, messages: list[dict], params: dict) -> dict:
        """The exact body sent (stored verbatim in provenance). `params` holds no None values."""

    @abstractmethod
    def send(self, *, provider, api_key: str, body: dict) -> HTTPReply:
        """Send one request with the adapter's retries off; a non-2xx reply, a timeout or a connection error is
        raised as a classified ProviderError (`status_error` for statuses)."""

    @abstractmethod
    def reply_parse(self, data: dict) -> Reply:
        """Read a 200 reply body; raise KeyError/IndexError/TypeError/ValueError when it is not a completion."""

    def usage_read(self, data: dict) -> tuple[int | None, int | None]:
        """The (input, output) tokens a reply body reports, even when the rest of it is not a completion; a
        wire format whose bodies carry no usage keeps this default."""
        return None, None

    def usage_of(self, text: str | dict) -> tuple[int | None, int | None]:
        """`usage_read` of any body: (None, None) when it is not JSON or its usage is not numbers."""
        try:
            data = json.loads(text) if isinstance(text, str) else text
            usage_in, usage_out = self.usage_read(data) if isinstance(data, dict) else (None, None)
        except (ValueError, TypeError, AttributeError):
            return None, None
        return _count(usage_in), _count(usage_out)

    def models_list(self, *, provider, api_key: str, timeout: float, limit: int = 500) -> list[str]:
        """The names of the models the endpoint serves, sorted. A wire format with no such list keeps this
        default (the admin then asks for the model's name as free text)."""
        raise PermanentProviderError("no_model_list", "this kind of provider does not list its models")

    def complete(self, *, provider, api_key: str, body: dict) -> Completion:
        """Send `body` and return its Completion, or raise a classified ProviderError (a malformed or empty body
        is transient, a refusal permanent)."""
        started = time.monotonic()
        http = self.send(provider=provider, api_key=api_key, body=body)
        latency_ms = int((time.monotonic() - started) * 1000)
        try:
            data, reply = self.body_read(http.text, http_status=http.status)
            return completion_checked(
                provider=provider,
                reply=reply,
                request=body,
                raw_response=data,
                latency_ms=latency_ms,
                http_status=http.status,
                headers=http.headers,
            )
        except ProviderError as exc:  # answered, then refused: the usage it reported is still spent
            usage_in, usage_out = self.usage_of(http.text)
            exc.usage_record(provider=provider, usage_in=usage_in, usage_out=usage_out)
            raise

    def stream(self, *, provider, api_key: str, body: dict, timeout: float) -> Iterator[StreamChunk]:
        """The reply to `body` as it is produced: text chunks, then one StreamChunk with `end`. A wire format
        without streaming keeps this default: one call (`complete`), its text as one chunk. Raises a classified
        ProviderError, also midway."""
        completion = self.complete(provider=provider, api_key=api_key, body=body)
        yield StreamChunk(text=completion.text)
        end = Reply(
            text="",
            finish_reason=completion.finish_reason,
            model_returned=completion.model_returned,
            system_fingerprint=completion.system_fingerprint,
            response_id=completion.response_id,
            usage_in=completion.usage_in,
            usage_out=completion.usage_out,
        )
        yield StreamChunk(end=end, raw=completion.raw_response)

    def moderate(self, *, provider, api_key: str, text: str, model: str, timeout: float) -> Moderation:
        """The provider's moderation verdict on `text`. A wire format without a moderation endpoint keeps this
        default."""
        raise PermanentProviderError("no_moderation", f"provider {provider.name} has no moderation endpoint")

    async def astream(
        self, *, provider, api_key: str, body: dict, timeout: float
    ) -> AsyncIterator[StreamChunk]:
        """`stream` for an async reader. This default reads the sync stream in a worker thread, one chunk at a
        time (the test model answers at once); the SDK adapters read the provider with their async clients."""
        chunks = self.stream(provider=provider, api_key=api_key, body=body, timeout=timeout)
        try:
            while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                yield chunk
        finally:
            await asyncio.to_thread(chunks.close)

    def body_read(self, text: str | dict, *, http_status: int) -> tuple[dict, Reply]:
        """A reply body (text or already decoded) and its Reply; TransientProviderError("malformed") if it is
        not a completion of this wire format."""
        try:
            data = json.loads(text) if isinstance(text, str) else text
            if not isinstance(data, dict):
                raise ValueError("the body is not a JSON object")
            return data, self.reply_parse(data)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            shown = text[:300] if isinstance(text, str) else text
            raise TransientProviderError(
                "malformed",
                f"malformed body: not a valid completion ({exc}): {shown!r}",
                http_status=http_status,
            ) from None


@dataclass(frozen=True)
class BatchSubmitted:
    batch_id: str
    status: str
    input_file_id: str = ""


@dataclass(frozen=True)
class BatchState:
    status: str  # the provider's own word for it
    ended: bool
    completed: bool
    output_file_id: str = ""
    error_file_id: str = ""
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BatchLine:
    """One line of a batch's results: its custom id and either the reply body or the classified error."""

    custom_id: str
    body: dict | None = None
    error: ProviderError | None = None


class BatchAPI(ABC):
    """The capability of submitting many requests at once and collecting their replies later (cheaper, slow).
    Mixed into an adapter whose wire format has one; `registry.adapter_batch_api` says which do."""

    price_factor: ClassVar[Decimal] = Decimal(1)

    @abstractmethod
    def batch_submit(
        self, *, provider, api_key: str, requests: list[tuple[str, dict]], metadata: dict
    ) -> BatchSubmitted:
        """Upload (custom id, request body) pairs as one batch. Raises a classified ProviderError."""

    @abstractmethod
    def batch_state(self, *, provider, api_key: str, batch_id: str) -> BatchState:
        """How the provider says the batch is doing."""

    @abstractmethod
    def batch_results(self, *, provider, api_key: str, state: BatchState) -> list[BatchLine]:
        """The lines of an ended batch (output and errors). Raises ValueError for nothing; unreadable lines are
        returned as BatchLine(custom_id="") so the caller can count them."""
