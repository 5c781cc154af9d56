"""Which environment variables a provider may name as its API key, and reading the key.

A staff user names the variable (Provider.api_key_env); the key goes out as a header to the provider's base URL,
which is any host. So the name is checked twice — by the model's validator (the admin form refuses it) and again
right before a request is built (`provider_api_key`, defence in depth for rows written around the form) — against:

* an allow-list pattern, KEY_ENV_PATTERN: upper-case letters, digits and underscores ending in ``_API_KEY``,
  ``_TOKEN`` or ``_KEY`` (OPENAI_API_KEY, HF_TOKEN, TOGETHER_KEY);
* a deny list of the site's own secrets: settings.PROVIDER_KEY_ENV_DENYLIST (SECRET_KEY, DATABASE_URL, REDIS_URL,
  CELERY_BROKER_URL, SENTRY_DSN and any added through the PROVIDER_KEY_ENV_DENYLIST variable) and every DJANGO_*
  name. SECRET_KEY fits the pattern, which is why the deny list is checked first.

No database access and no provider call here.
"""

from __future__ import annotations

import re

from django.conf import settings

KEY_ENV_PATTERN = re.compile(r"^[A-Z][A-Z0-9_]*_(API_KEY|TOKEN|KEY)$")
DENIED_PREFIXES = ("DJANGO_",)


def key_env_problem(name: str) -> str | None:
    """Why `name` may not hold a provider's key, in one sentence; None when it may."""
    name = name or ""
    denied = {entry.strip().upper() for entry in settings.PROVIDER_KEY_ENV_DENYLIST if entry.strip()}
    if name.upper() in denied or name.upper().startswith(DENIED_PREFIXES):
        return (
            f"{name} holds one of this site's own secrets; a provider's key must have a variable of its own "
            "(e.g. OPENAI_API_KEY)."
        )
    if not KEY_ENV_PATTERN.fullmatch(name):
        return (
            f"{name!r} is not an API key variable name: give the NAME of an environment variable in capitals "
            "ending in _API_KEY, _TOKEN or _KEY (e.g. OPENAI_API_KEY) — never the key itself."
        )
    return None
