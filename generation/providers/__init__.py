"""LLM providers: the only place in the project that talks to them. One adapter per wire format.

    base.py           Completion (typed), Reply, the classified errors, ProviderAdapter and BatchAPI interfaces
    sdk.py            what the two official SDKs share (cached clients, their errors classified)
    openai_compat.py  OpenAI-compatible chat completions, and OpenAI's Batch API
    anthropic.py      Anthropic's Messages API
    placeholder.py    the test model: placeholder replies made here, no network, no key (a dry run)
    registry.py       Provider.kind → adapter (one registration per wire format)
    call.py           provider_complete: key, limits, adapter, log

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

* The key is read from the environment variable the provider names, at call time, and only if that name is an
  allowed key variable (generation.keys: never SECRET_KEY, DATABASE_URL, DJANGO_*, …). It is never returned,
  logged, or put in `Completion.request` / `raw_response` (those are bodies, not headers).
* The provider's requests-per-minute, tokens-per-minute and concurrency limits are respected across every
  process and worker (see generation.ratelimit); `rate_limit=False` skips this (one-off checks only).
* The SDKs' own retries are off: every failure comes back as exactly one of
  - TransientProviderError(kind, retry_after): worth retrying later — timeout, connection error, 429 (with the
    Retry-After it sent, if any), 5xx/529 overloaded, a malformed or empty body, or our own limiter asking to wait
    (`LimiterWait`, a subclass: no request was sent);
  - PermanentProviderError(kind, reason): retrying cannot help — 400 bad request, 401/403 bad key, 404 model not
    served, context too long, content filter/refusal, quota exhausted, key variable not set or not allowed.
  The caller decides how often to retry (generation.services.running holds the one retry policy).
* No database access here, so it is safe (and required) to call outside any transaction.
"""

from generation.providers.base import (
    BatchAPI,
    Completion,
    LimiterWait,
    PermanentProviderError,
    ProviderAdapter,
    ProviderError,
    Reply,
    TransientProviderError,
    cost_compute,
    tokens_estimate,
)
from generation.providers.call import provider_api_key, provider_complete, provider_request_build
from generation.providers.registry import (
    adapter_batch_api,
    adapter_for,
    adapter_register,
    adapter_unregister,
    batch_api_of,
)

__all__ = [
    "BatchAPI",
    "Completion",
    "LimiterWait",
    "PermanentProviderError",
    "ProviderAdapter",
    "ProviderError",
    "Reply",
    "TransientProviderError",
    "adapter_batch_api",
    "adapter_for",
    "adapter_register",
    "adapter_unregister",
    "batch_api_of",
    "cost_compute",
    "provider_api_key",
    "provider_complete",
    "provider_request_build",
    "tokens_estimate",
]
