"""Sending through a vendor's official SDK (openai, anthropic): one cached client per endpoint and key, the SDK's
own retries off, and its exceptions mapped onto our classified errors. Both SDKs are built on httpx and share the
shape this relies on (APITimeoutError, APIConnectionError, APIStatusError, `with_raw_response`)."""

from __future__ import annotations

import importlib
import inspect
import threading
from abc import abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import httpcore2
import httpx2

from generation.outbound import GuardedBackend, refused_in_chain
from generation.providers.base import (
    HTTPReply,
    PermanentProviderError,
    ProviderAdapter,
    TransientProviderError,
    status_error,
)

#: What a provider that needs no key (a local server) is sent as its key.
NO_KEY = "no-key"
#: The connections an SDK client keeps open (its own default).
POOL_LIMITS = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)


class GuardedTransport(httpx2.HTTPTransport):
    """httpx's transport with every connection opened through the outbound policy (generation.outbound): the
    SDK's requests, its redirects and its Batch API uploads alike. Proxies from the environment are not used
    (a proxy would be dialled instead of the checked address)."""

    def __init__(self) -> None:
        super().__init__(limits=POOL_LIMITS)
        self._pool = httpcore2.ConnectionPool(
            ssl_context=httpx2.create_ssl_context(),
            max_connections=POOL_LIMITS.max_connections,
            max_keepalive_connections=POOL_LIMITS.max_keepalive_connections,
            keepalive_expiry=POOL_LIMITS.keepalive_expiry,
            network_backend=GuardedBackend(),
        )


class SDKAdapter(ProviderAdapter):
    sdk_name: str  # the vendor's package
    client_class: str  # its client's class name

    @property
    def sdk(self) -> ModuleType:
        """The vendor's package, imported when a provider is first called: importing both SDKs takes 1–2 s, which
        every manage.py command and every worker would otherwise pay at start-up (bench/researcher.py)."""
        return importlib.import_module(self.sdk_name)

    def __init__(self) -> None:
        self._clients: dict[tuple, Any] = {}
        self._lock = threading.Lock()
        self._signatures: dict[str, frozenset] = {}

    def client(self, provider, api_key: str):
        """The SDK client for this endpoint and key (built once per process; clients are thread-safe)."""
        key = (provider.base_url or "", api_key, float(provider.timeout_seconds))
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                options = {
                    # The SDKs refuse to build a client without a key, and given none they would read their
                    # vendor's variable from the environment (and send it to this endpoint): a keyless endpoint
                    # gets a word that is no one's key.
                    "api_key": api_key or NO_KEY,
                    "timeout": float(provider.timeout_seconds),
                    "max_retries": 0,
                    "http_client": self.sdk.DefaultHttpxClient(transport=GuardedTransport()),
                }
                if provider.base_url:
                    options["base_url"] = provider.base_url
                client = getattr(self.sdk, self.client_class)(**options)
                self._clients[key] = client
            return client

    @abstractmethod
    def create_method(self, client) -> Callable:
        """The SDK's raw-response create call for this wire format."""

    @contextmanager
    def errors_classified(self, provider) -> Iterator[None]:
        """Raise the SDK's failures as our classified errors (a non-2xx status through `status_error`)."""
        sdk = self.sdk
        try:
            yield
        except sdk.APITimeoutError as exc:
            raise TransientProviderError(
                "timeout", f"no reply within {provider.timeout_seconds:g}s ({exc.__class__.__name__})"
            ) from None
        except sdk.APIConnectionError as exc:
            refused = refused_in_chain(exc)
            if refused is not None:
                raise PermanentProviderError("blocked_address", str(refused)) from None
            raise TransientProviderError(
                "connection", f"could not reach {provider.base_url or 'the provider'}: {exc}"
            ) from None
        except sdk.APIStatusError as exc:
            raise status_error(exc.status_code, exc.response.text, exc.response.headers) from None

    def _accepted(self, create) -> frozenset:
        name = getattr(create, "__qualname__", repr(create))
        if name not in self._signatures:
            self._signatures[name] = frozenset(inspect.signature(create).parameters) - {
                "extra_body",
                "extra_headers",
            }
        return self._signatures[name]

    def arguments(self, create, body: dict) -> dict:
        """`body` as the SDK's `create` takes it. SDK versions differ in which body fields they take as arguments
        (newer Anthropic SDKs dropped temperature/top_p): pass what the signature takes, send the rest through
        extra_body, so the wire body is exactly `body` either way."""
        accepted = self._accepted(create)
        direct = {k: v for k, v in body.items() if k in accepted}
        extra = {k: v for k, v in body.items() if k not in accepted}
        return {**direct, "extra_body": extra or None}

    def send(self, *, provider, api_key: str, body: dict) -> HTTPReply:
        create = self.create_method(self.client(provider, api_key))
        with self.errors_classified(provider):
            raw = create(**self.arguments(create, body))
        http = raw.http_response
        return HTTPReply(status=http.status_code, text=http.text, headers=http.headers)

    def models_list(self, *, provider, api_key: str, timeout: float, limit: int = 500) -> list[str]:
        """The ids of the models the endpoint lists (`GET /models` through the SDK's `models.list()`, following
        its pages up to `limit`), sorted; a classified ProviderError when it cannot."""
        client = self.client(provider, api_key)
        names: list[str] = []
        with self.errors_classified(provider):
            for model in client.models.list(timeout=timeout):
                names.append(str(model.id))
                if len(names) >= limit:
                    break
        return sorted(set(names))
