"""One call to a provider: the key read (and checked) at call time, the cross-worker limits, the adapter, the log."""

from __future__ import annotations

import logging
import os

from generation.keys import key_env_problem, key_host_problem, provider_host, provider_origin
from generation.providers.base import (
    Completion,
    LimiterWait,
    PermanentProviderError,
    ProviderError,
    tokens_estimate,
)
from generation.providers.registry import adapter_for
from generation.ratelimit import RateLimitWait, limit_spec_for, limiter_acquire, limiter_release
from studies.sealed import SealedKeyError, sealed_key_for_origin

logger = logging.getLogger(__name__)


def provider_api_key(provider) -> str:
    """The provider's key, read at call time (a key entered or changed in the admin is used by the next call, with
    no restart): the key typed in the admin if one is stored (studies.sealed; only for the endpoint it was
    entered for), else the environment variable the provider names, else "" (an endpoint that needs no key).

    PermanentProviderError (nothing is read, nothing sent), its message a sentence saying what to do, when the
    stored key was entered for another endpoint or cannot be decrypted, the variable's name is not an allowed key
    variable (generation.keys: e.g. SECRET_KEY, DATABASE_URL, PROLIFIC_TOKEN), the variable's key is not bound to
    the provider's host, or the variable is not set."""
    if provider.api_key_sealed:
        try:
            return sealed_key_for_origin(
                provider.api_key_sealed,
                origin=provider_origin(kind=provider.kind, base_url=provider.base_url),
            )
        except SealedKeyError as exc:
            raise PermanentProviderError("unbound_key_host", f"Provider {provider.name}: {exc}") from None
    if not provider.api_key_env:
        return ""
    problem = key_env_problem(provider.api_key_env)
    if problem:
        raise PermanentProviderError("forbidden_key_env", f"Provider {provider.name}: {problem}")
    problem = key_host_problem(
        provider.api_key_env, provider_host(kind=provider.kind, base_url=provider.base_url)
    )
    if problem:
        raise PermanentProviderError("unbound_key_host", f"Provider {provider.name}: {problem}")
    value = os.environ.get(provider.api_key_env, "")
    if not value:
        raise PermanentProviderError(
            "missing_key",
            f"The environment variable {provider.api_key_env} (the API key of provider {provider.name}) is not "
            "set in this server's environment. Enter the key on the provider's page instead (it is used at once), "
            "or set the variable and restart the server and the workers.",
        )
    return value


def provider_request_build(*, provider, model: str, system: str, messages: list[dict], params: dict) -> dict:
    """The exact request body the provider's adapter sends (stored verbatim in provenance). None params are
    left out."""
    params = {k: v for k, v in (params or {}).items() if v is not None}
    return adapter_for(provider).request_build(model=model, system=system, messages=messages, params=params)


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
    """Ask `model` at `provider` once and return the Completion, or raise a classified error (see the package doc).

    messages: [{"role": "user" | "assistant", "content": str}, ...]; system: the system prompt (each adapter puts
    it where its wire format wants it); params: temperature, top_p, max_tokens, seed, stop (None values are not
    sent). With rate_limit, waits for the provider's limits up to max_wait seconds, then raises LimiterWait
    (transient, nothing sent)."""
    params = dict(params or {})
    api_key = provider_api_key(provider)
    adapter = adapter_for(provider)
    body = provider_request_build(
        provider=provider, model=model, system=system, messages=messages, params=params
    )
    lease = None
    if rate_limit:
        estimate = tokens_estimate(system=system, messages=messages, max_tokens=params.get("max_tokens"))
        try:
            lease = limiter_acquire(spec=limit_spec_for(provider), tokens=estimate, max_wait=max_wait)
        except RateLimitWait as wait:
            raise LimiterWait(wait.retry_after) from None
    actual_tokens = None
    said = {"provider": provider.name, "model": model}
    try:
        completion = adapter.complete(provider=provider, api_key=api_key, body=body)
        actual_tokens = _tokens_used(completion)
        logger.info(
            "provider call ok",
            extra={**said, "latency_ms": completion.latency_ms, "finish_reason": completion.finish_reason},
        )
        return completion
    except ProviderError as exc:
        actual_tokens = _tokens_used(exc)
        logger.warning(
            "provider call failed", extra={**said, "error_kind": exc.kind, "http_status": exc.http_status}
        )
        raise
    finally:
        if lease is not None:
            limiter_release(lease=lease, actual_tokens=actual_tokens)


def _tokens_used(outcome) -> int | None:
    """Tokens in and out a completion (or a failed call) reports, for the limiter; None when it reports none."""
    if outcome.usage_in is None and outcome.usage_out is None:
        return None
    return int(outcome.usage_in or 0) + int(outcome.usage_out or 0)
