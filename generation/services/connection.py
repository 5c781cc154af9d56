"""Testing a provider before a study depends on it: one cheap call (a few tokens) through the provider's adapter,
with what it answered (the model, the latency) or, when it fails, what to check in words an admin can act on.

The key is read from the environment as for any call and never shown. Nor is the target's error body: the page
says the HTTP status and what to check, in our words only (the body of an arbitrary host could carry anything an
address behind it answers); the web server's log keeps the provider's own words."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

from django.core.cache import cache

from generation.providers import (
    PermanentProviderError,
    ProviderError,
    TransientProviderError,
    adapter_for,
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


def _key_advice(provider) -> str:
    """Where this provider's key comes from, as the thing to check."""
    if provider.api_key_sealed:
        return "Check the key entered on the provider's page (type it again there to replace it)"
    if provider.api_key_env:
        return (
            f"Check the key in the environment variable {provider.api_key_env} of the web server and the workers "
            "(and that it belongs to this provider), or enter the key on the provider's page instead"
        )
    return "This provider has no key: enter the key on the provider's page"


def _advice(provider, model: str, error: ProviderError) -> str:
    where = provider.base_url or "the vendor's own endpoint"
    status = f" (HTTP {error.http_status})" if error.http_status else ""
    if error.kind == "bad_key":
        return f"The provider refused the key{status}. {_key_advice(provider)}."
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
        return sentence(error.message)
    if isinstance(error, TransientProviderError):
        return f"The provider had a passing problem{status}. Try again in a moment."
    return (
        f"The provider refused the request{status}. Check the model's name and the provider's kind; the "
        "web server's log has the provider's own words."
    )


def sentence(text: str) -> str:
    """`text` as a sentence: a capital first letter and a full stop."""
    text = text.strip().rstrip(".")
    return f"{text[:1].upper()}{text[1:]}." if text else ""


def _without_key(text: str, key: str) -> str:
    return text.replace(key, KEY_SHOWN_AS) if key else text


def provider_connection_test(*, provider, model: str) -> ConnectionCheck:
    """Ask `model` at `provider` for a few tokens, through the adapter and the provider's limits (waiting at most
    a few seconds), and say what happened. Stores nothing; never raises a ProviderError."""
    model = (model or "").strip()
    if not model:
        return ConnectionCheck(
            ok=False,
            model="",
            message="Name a model to ask (pick one from the provider's list, or type its name).",
        )
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


# --- the provider's own list of models ------------------------------------------------------------------------

#: How long a fetched list is reused (a list that could not be fetched: a minute, so a fixed endpoint shows soon).
MODELS_CACHE_SECONDS = 300
MODELS_FAILURE_CACHE_SECONDS = 60
#: The longest a page waits for the list (the provider's own timeout may be minutes, meant for generation).
MODELS_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class ModelList:
    """The models a provider lists, or why they could not be fetched (a sentence saying what to do; the model's
    name can then be typed)."""

    models: list[str] = field(default_factory=list)
    problem: str = ""


def _models_problem(provider, error: ProviderError) -> str:
    status = f" (HTTP {error.http_status})" if error.http_status else ""
    where = provider.base_url or "the vendor's own endpoint"
    if error.kind == "no_model_list":
        return (
            "This kind of provider does not list its models: type the model's name as the provider spells it."
        )
    if error.kind == "model_not_found":
        return (
            f"{where} does not list its models{status}: type the model's name as the endpoint spells it (check "
            "that the base URL is the API's root, usually ending in /v1)."
        )
    if error.kind == "bad_key":
        return f"The provider refused the key when asked for its models{status}. {_key_advice(provider)}."
    if error.kind in ("timeout", "connection"):
        return (
            f"Could not fetch the list of models from {where} (no answer, or the connection was refused): "
            "type the model's name, and use Test connection to see what is wrong."
        )
    if isinstance(error, PermanentProviderError) and error.kind in OUR_OWN_REASONS:
        return f"{sentence(error.message)} Meanwhile, type the model's name."
    return (
        f"Could not fetch the list of models from {where}{status}: type the model's name, and use Test connection "
        "to see what is wrong."
    )


def _models_cache_key(provider, key: str) -> str:
    # Anything that changes where the list comes from, or with which key, changes the key of the cache.
    source = "\x00".join([str(provider.pk), provider.kind, provider.base_url, key])
    return "provider-models:" + hashlib.sha256(source.encode()).hexdigest()


def provider_models(*, provider, fresh: bool = False) -> ModelList:
    """The models `provider` lists (through its adapter: `models.list()` of the OpenAI or Anthropic SDK), or why
    not. Reused for a few minutes (`fresh` asks again); waits at most MODELS_TIMEOUT_SECONDS. Never raises a
    ProviderError; never shows the key."""
    try:
        key = provider_api_key(provider)
    except PermanentProviderError as exc:
        return ModelList(problem=_models_problem(provider, exc))
    cache_key = _models_cache_key(provider, key)
    if not fresh:
        cached = cache.get(cache_key)
        if cached is not None:
            return ModelList(models=list(cached["models"]), problem=cached["problem"])
    try:
        timeout = min(float(provider.timeout_seconds), MODELS_TIMEOUT_SECONDS)
        found = ModelList(
            models=adapter_for(provider).models_list(provider=provider, api_key=key, timeout=timeout)
        )
        if not found.models:
            found = ModelList(problem="The provider lists no models: type the model's name.")
    except ProviderError as exc:
        logger.info(
            "provider model list failed",
            extra={
                "provider": provider.name,
                "error_kind": exc.kind,
                "detail": _without_key(exc.message, key),
            },
        )
        found = ModelList(problem=_without_key(_models_problem(provider, exc), key))
    seconds = MODELS_FAILURE_CACHE_SECONDS if found.problem else MODELS_CACHE_SECONDS
    cache.set(cache_key, {"models": found.models, "problem": found.problem}, seconds)
    return found
