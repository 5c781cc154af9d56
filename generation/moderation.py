"""A provider's moderation endpoint asked about one text (OpenAI's /v1/moderations through the SDK), for the
safety check a live conversation runs on every message (kinds/chat/safety.py). The key is read at call time like
any call's (generation.providers.call), the connection goes through the outbound policy, and a wire format
without such an endpoint raises PermanentProviderError("no_moderation"). Nothing is stored here: the caller keeps
the verdict with the message it judged."""

from __future__ import annotations

from generation.providers.base import Moderation
from generation.providers.call import provider_api_key
from generation.providers.registry import adapter_for

MODERATION_MODEL = "omni-moderation-latest"
MODERATION_TIMEOUT = 5.0  # seconds: a person is waiting for their message to go


def moderate(
    *, provider, text: str, model: str = MODERATION_MODEL, timeout: float = MODERATION_TIMEOUT
) -> Moderation:
    """The verdict of `provider`'s moderation endpoint on `text`; a classified ProviderError when it fails."""
    return adapter_for(provider).moderate(
        provider=provider, api_key=provider_api_key(provider), text=text, model=model, timeout=timeout
    )
