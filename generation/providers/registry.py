"""Which adapter speaks a provider's wire format: one registration per Provider.kind, and nothing else in the
project branches on the kind. A new wire format is one ProviderAdapter subclass and one `adapter_register` call."""

from __future__ import annotations

from generation.providers.anthropic import AnthropicAdapter
from generation.providers.base import BatchAPI, PermanentProviderError, ProviderAdapter
from generation.providers.openai_compat import OpenAICompatAdapter
from generation.providers.placeholder import PlaceholderAdapter

_ADAPTERS: dict[str, ProviderAdapter] = {}


def adapter_register(adapter: ProviderAdapter) -> ProviderAdapter:
    """Serve providers of `adapter.kind` with `adapter` (one instance per process; it may cache clients)."""
    _ADAPTERS[adapter.kind] = adapter
    return adapter


def adapter_unregister(kind: str) -> None:
    _ADAPTERS.pop(kind, None)


def adapter_choices() -> list[tuple[str, str]]:
    """Provider.kind's choices: one per registered adapter (a callable, so a new one needs no migration)."""
    return [(kind, adapter.label) for kind, adapter in _ADAPTERS.items()]


def placeholder_kinds() -> list[str]:
    """The provider kinds whose replies are placeholders made here, not a model's (the test model)."""
    return [kind for kind, adapter in _ADAPTERS.items() if getattr(adapter, "placeholder", False)]


def adapter_sdk_modules() -> list[str]:
    """The vendor packages the registered adapters send through (imported on first use: a server imports them
    before its workers fork, config/warm.py)."""
    return sorted({adapter.sdk_name for adapter in _ADAPTERS.values() if getattr(adapter, "sdk_name", "")})


def adapter_for(provider) -> ProviderAdapter:
    """The adapter of `provider.kind`; PermanentProviderError naming the kinds there are otherwise."""
    adapter = _ADAPTERS.get(provider.kind)
    if adapter is None:
        raise PermanentProviderError(
            "unknown_kind",
            f"provider {provider.name} is of kind {provider.kind!r}, which no adapter speaks "
            f"(there are: {', '.join(sorted(_ADAPTERS))})",
        )
    return adapter


def adapter_batch_api(provider) -> BatchAPI | None:
    """The provider's adapter if its wire format has a Batch API, else None."""
    adapter = adapter_for(provider)
    return adapter if isinstance(adapter, BatchAPI) else None


def batch_api_of(provider) -> BatchAPI | None:
    """The provider's adapter if its wire format has a Batch API; None otherwise, and for a kind no adapter
    speaks (the ordinary path reports that one)."""
    try:
        return adapter_batch_api(provider)
    except PermanentProviderError:
        return None


adapter_register(OpenAICompatAdapter())
adapter_register(AnthropicAdapter())
adapter_register(PlaceholderAdapter())
