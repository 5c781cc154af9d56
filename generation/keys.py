"""Which environment variables a provider may name as its API key, where that key may be sent, and reading it.

A staff user names the variable (Provider.api_key_env) and the base URL; the key goes out as a header to that URL's
host. So both are checked twice — by the model's validation (the admin form refuses them) and again right before
a request is built (`provider_api_key`, defence in depth for rows written around the form):

* the name (`key_env_problem`): upper-case letters, digits and underscores ending in ``_API_KEY``, ``_TOKEN`` or
  ``_KEY`` (KEY_ENV_PATTERN), and never one of the site's own secrets (`site_secret_problem`: SECRET_KEY,
  DATABASE_URL, every DJANGO_* name and any other name in settings.PROVIDER_KEY_ENV_DENYLIST) nor another
  service's credential: every name starting with settings.RECRUITING_SECRET_PREFIX (PROLIFIC_), the prefix the
  recruiting app requires of its token's and webhook secret's variables (recruiting.models);
* the host (`key_host_problem`): a key is bound to its provider's host. settings.PROVIDER_KEY_HOSTS (the
  operator's, from the environment) maps each vendor key to the hosts it may go to (OPENAI_API_KEY →
  api.openai.com, ANTHROPIC_API_KEY → api.anthropic.com, …) and a name it lists goes to those hosts only; a name
  it does not list may go only to a host the operator allow-listed as their own (PROVIDER_URL_ALLOWLIST: a vLLM or Ollama server, loopback in the test
  suite and `make run`). So a staff user can never send a key to a host of their choosing.

Where the connection may go at all (public addresses only) is generation.outbound's rule. No database access here.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django.conf import settings

from generation.outbound import host_allowlisted
from studies.sealed import url_origin

KEY_ENV_PATTERN = re.compile(r"^[A-Z][A-Z0-9_]*_(API_KEY|TOKEN|KEY)$")
SITE_PREFIXES = ("DJANGO_",)
#: Where each vendor's key goes when a provider leaves its base URL blank (the SDK's own endpoint).
VENDOR_HOSTS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}


def site_secret_problem(name: str) -> str | None:
    """Why `name` may not be named by any setting a staff user edits (a provider's key, a recruiting token): it is
    not an environment variable name of the key kind, or it is one of the site's own secrets. None when it may."""
    name = name or ""
    denied = {entry.strip().upper() for entry in settings.PROVIDER_KEY_ENV_DENYLIST if entry.strip()}
    if name.upper() in denied or name.upper().startswith(SITE_PREFIXES):
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


def key_env_problem(name: str) -> str | None:
    """Why `name` may not hold a provider's key, in one sentence; None when it may."""
    problem = site_secret_problem(name)
    if problem:
        return problem
    if name.upper().startswith(settings.RECRUITING_SECRET_PREFIX):
        return (
            f"{name} holds the recruiting platform's credential (it approves and pays participants); a provider's "
            "key must have a variable of its own (e.g. OPENAI_API_KEY)."
        )
    return None


def key_hosts() -> dict[str, frozenset[str]]:
    """settings.PROVIDER_KEY_HOSTS (entries ``NAME=host``; a name may be listed once per host) as name → hosts."""
    bound: dict[str, set[str]] = {}
    for entry in settings.PROVIDER_KEY_HOSTS:
        name, _, host = entry.partition("=")
        if name.strip() and host.strip():
            bound.setdefault(name.strip().upper(), set()).add(host.strip().rstrip(".").lower())
    return {name: frozenset(hosts) for name, hosts in bound.items()}


def provider_host(*, kind: str, base_url: str) -> str:
    """The host a provider's requests go to (its vendor's own when the base URL is blank)."""
    if base_url:
        return (urlsplit(base_url).hostname or "").rstrip(".").lower()
    return VENDOR_HOSTS.get(kind, "")


def provider_origin(*, kind: str, base_url: str) -> str:
    """Where a provider's requests go, as scheme://host:port (its vendor's own when the base URL is blank): what a
    key typed in the admin is bound to (studies.sealed), so it never reaches another service, even one on
    the same machine."""
    if not base_url:
        host = VENDOR_HOSTS.get(kind, "")
        return f"https://{host}:443" if host else ""
    return url_origin(base_url)


def key_host_problem(name: str, host: str) -> str | None:
    """Why the key in `name` may not be sent to `host`, in one sentence; None when it may."""
    bound = key_hosts().get((name or "").upper())
    if bound:
        if host in bound:
            return None
        return f"{name} may be sent only to {', '.join(sorted(bound))} (PROVIDER_KEY_HOSTS), not to {host or 'no host'}."
    if host and host_allowlisted(host):
        return None
    return (
        f"{name} is not bound to {host or 'this host'}: the operator binds each key variable to its provider's "
        f"host in PROVIDER_KEY_HOSTS (e.g. {name}={host or 'api.example.com'}), or lists the host of an endpoint "
        "of their own in PROVIDER_URL_ALLOWLIST."
    )
