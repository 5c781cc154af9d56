"""Secrets typed in the admin (LLM providers' keys, the Prolific API token), stored encrypted at rest and bound to
the endpoint they were typed for.

A key is sealed with settings.PROVIDER_KEYS_SECRET (Fernet: AES-128-CBC with an HMAC-SHA256, from the
`cryptography` package; MultiFernet over the comma-separated list, the first key encrypting, every key decrypting,
so the operator can rotate). What is sealed is the key AND where it may go (the origin of the service it
is for, scheme://host:port: `url_origin`; a provider's is generation.keys.provider_origin), so the binding cannot be changed by editing a column: a sealed
key opened for a provider whose base URL now points elsewhere — another host, or another port of the same one — is
refused (`sealed_key_for_origin`). The database holds only the token; the key is never shown again (the admin says
only that one is set). Generation (provider keys) and recruiting (the Prolific token) both seal through this one
module, which is why it lives in the spine.

Without PROVIDER_KEYS_SECRET (production, not configured) nothing can be sealed: `key_store_problem` says so, and
the admin refuses the key with that sentence. No database access here.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class SealedKeyError(Exception):
    """A sealed key cannot be used; the message is a sentence for the admin."""


def url_origin(url: str) -> str:
    """Where requests to `url` go, as scheme://host:port (the port spelled out, so :443 and no port are one)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").rstrip(".").lower()
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = 0
    shown = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{shown}:{port}"


def key_store_problem() -> str | None:
    """Why a key typed in the admin cannot be stored on this server, in one sentence; None when it can."""
    if not settings.PROVIDER_KEYS_SECRET:
        return (
            "This server cannot store typed keys or tokens: its operator has not set PROVIDER_KEYS_SECRET (see "
            "docs/deployment.md). Ask them to set it, or name an environment variable that holds the key instead."
        )
    return None


def _fernet() -> MultiFernet:
    return MultiFernet([Fernet(secret.encode()) for secret in settings.PROVIDER_KEYS_SECRET])


def key_seal(*, key: str, origin: str) -> str:
    """The token stored for `key`, usable only for `origin`. SealedKeyError when the server has no secret."""
    problem = key_store_problem()
    if problem:
        raise SealedKeyError(problem)
    payload = json.dumps({"origin": origin, "key": key}).encode()
    return _fernet().encrypt(payload).decode()


def _opened(token: str) -> dict:
    problem = key_store_problem()
    if problem:
        raise SealedKeyError(problem)
    try:
        payload = json.loads(_fernet().decrypt(token.encode()))
    except (InvalidToken, ValueError) as exc:
        raise SealedKeyError(
            "The stored key cannot be decrypted with this server's PROVIDER_KEYS_SECRET (was the secret changed "
            "without keeping the old one?). Enter the key again on the page where it was typed."
        ) from exc
    return payload


def sealed_origin(token: str) -> str:
    """Where a sealed key may go (to show on the provider's page; never the key)."""
    return str(_opened(token).get("origin", ""))


def sealed_key_for_origin(token: str, *, origin: str) -> str:
    """The key, if it was sealed for `origin`; SealedKeyError saying what to do otherwise."""
    payload = _opened(token)
    if payload.get("origin") != origin:
        raise SealedKeyError(
            f"The stored key was entered for {payload.get('origin') or 'another endpoint'}, and requests now go "
            f"to {origin or 'nowhere'}: a key is only ever sent where it was entered for. Enter the key "
            "again on the page where it was typed (or remove it)."
        )
    return str(payload["key"])


def key_reseal(token: str) -> str:
    """The token re-encrypted with the first secret (after a rotation), origin and key unchanged; SealedKeyError
    when no secret decrypts it."""
    try:
        return _fernet().rotate(token.encode()).decode()
    except InvalidToken as exc:
        raise SealedKeyError("No secret in PROVIDER_KEYS_SECRET decrypts this key.") from exc
