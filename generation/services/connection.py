"""Testing a provider before a study depends on it: one cheap call (a few tokens) through the provider's adapter,
with what it answered (the model, the latency) or, when it fails, what to check in words an admin can act on.

The key is read from the environment as for any call and never shown. Nor is the target's error body: the page
says the HTTP status and what to check, in our words only (the body of an arbitrary host could carry anything an
address behind it answers); the web server's log keeps the provider's own words."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from generation.providers import (
    PermanentProviderError,
    ProviderError,
    TransientProviderError,
    provider_api_key,
    provider_complete,
)

logger = logging.getLogger(__name__)

#: What the test asks (tiny on purpose: a test costs a few tokens).
TEST_MESSAGES = [{"role": "user", "content": "Reply with the single word OK."}]
TEST_MAX_TOKENS = 5
KEY_SHOWN_AS = "[the key]"
#: Refusals worded by this site (nothing of the target's reply in them), shown as they are.
OUR_OWN_REASONS = frozenset({"missing_key", "forbidden_key_env", "unbound_key_host", "blocked_address"})


@dataclass(frozen=True)
class ConnectionCheck:
    ok: bool
    model: str  # the model asked for
    message: str  # one paragraph for the admin
    model_returned: str = ""
    latency_ms: int | None = None
    reply: str = ""
    error_kind: str = ""
    http_status: int | None = None


def _advice(provider, model: str, error: ProviderError) -> str:
    where = provider.base_url or "the vendor's own endpoint"
    status = f" (HTTP {error.http_status})" if error.http_status else ""
    if error.kind == "bad_key":
        return (
            f"The provider refused the key{status}. Check the key in the environment variable "
            f"{provider.api_key_env} of the web server and the workers (and that it belongs to this provider)."
        )
    if error.kind == "model_not_found":
        hint = ""
        if provider.kind == "openai" and provider.base_url and "/v1" not in provider.base_url:
            hint = " This base URL has no /v1: OpenAI-compatible servers usually serve the API under /v1."
        return (
            f"Not found{status}: {where} does not serve the model “{model}” at this path. Check the model's "
            f"name as the endpoint spells it and that the base URL is the API's root.{hint}"
        )
    if error.kind == "timeout":
        return (
            f"No reply from {where} within {provider.timeout_seconds:g} s. Is the server up and not "
            "overloaded? (The timeout is under Limits.)"
        )
    if error.kind == "connection":
        return (
            f"Could not connect to {where} (connection refused, or the host is unknown). Check the host and "
            "port in the base URL and that the server is running and reachable from this machine."
        )
    if error.kind == "malformed":
        return (
            f"{where} answered{status}, but not with a chat completion of this provider's kind. Check the base "
            "URL (it should be the API's root) and the provider's kind."
        )
    if error.kind == "rate_limit_wait":
        return (
            "The provider's own limits (requests or tokens per minute) are used up right now; try again soon."
        )
    if isinstance(error, PermanentProviderError) and error.kind in OUR_OWN_REASONS:
        return f"{error.message.rstrip('.')}."
    if isinstance(error, TransientProviderError):
        return f"The provider had a passing problem{status}. Try again in a moment."
    return (
        f"The provider refused the request{status}. Check the model's name and the provider's kind; the "
        "web server's log has the provider's own words."
    )


def _without_key(text: str, key: str) -> str:
    return text.replace(key, KEY_SHOWN_AS) if key else text


def provider_connection_test(*, provider, model: str) -> ConnectionCheck:
    """Ask `model` at `provider` for a few tokens, through the adapter and the provider's limits (waiting at most
    a few seconds), and say what happened. Stores nothing; never raises a ProviderError."""
    model = (model or "").strip()
    if not model:
        return ConnectionCheck(ok=False, model="", message="Name a model to ask (as the endpoint spells it).")
    try:
        key = provider_api_key(provider)
    except PermanentProviderError as exc:
        return ConnectionCheck(
            ok=False, model=model, message=_advice(provider, model, exc), error_kind=exc.kind
        )
    try:
        completion = provider_complete(
            provider=provider,
            model=model,
            messages=TEST_MESSAGES,
            params={"max_tokens": TEST_MAX_TOKENS},
            max_wait=5.0,
        )
    except ProviderError as exc:
        if exc.kind == "empty":  # it answered, with no text (e.g. a reasoning model spent the few tokens)
            return ConnectionCheck(
                ok=True,
                model=model,
                message=f"{provider.name} answered (with no text in {TEST_MAX_TOKENS} tokens).",
                http_status=exc.http_status,
            )
        logger.warning(
            "provider connection test failed",
            extra={
                "provider": provider.name,
                "error_kind": exc.kind,
                "detail": _without_key(exc.message, key),
            },
        )
        return ConnectionCheck(
            ok=False,
            model=model,
            message=_without_key(_advice(provider, model, exc), key),
            error_kind=exc.kind,
            http_status=exc.http_status,
        )
    returned = completion.model_returned or model
    return ConnectionCheck(
        ok=True,
        model=model,
        model_returned=returned,
        latency_ms=completion.latency_ms,
        reply=_without_key(completion.text.strip(), key),
        http_status=completion.http_status,
        message=f"{provider.name} answered as model {returned} in {completion.latency_ms} ms.",
    )
