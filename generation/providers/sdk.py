"""Sending through a vendor's official SDK (openai, anthropic): one cached client per endpoint and key, the SDK's
own retries off, and its exceptions mapped onto our classified errors. Both SDKs are built on httpx and share the
shape this relies on (APITimeoutError, APIConnectionError, APIStatusError, `with_raw_response`)."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import sys
import threading
import weakref
from abc import abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import httpcore2
import httpx2

from generation.outbound import GuardedAsyncBackend, GuardedBackend, refused_in_chain
from generation.providers.base import (
    HTTPReply,
    PermanentProviderError,
    ProviderAdapter,
    Reply,
    StreamChunk,
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


class GuardedAsyncTransport(httpx2.AsyncHTTPTransport):
    """GuardedTransport for the SDKs' async clients."""

    def __init__(self) -> None:
        super().__init__(limits=POOL_LIMITS)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(),
            max_connections=POOL_LIMITS.max_connections,
            max_keepalive_connections=POOL_LIMITS.max_keepalive_connections,
            keepalive_expiry=POOL_LIMITS.keepalive_expiry,
            network_backend=GuardedAsyncBackend(),
        )


class SDKAdapter(ProviderAdapter):
    sdk_name: str  # the vendor's package
    client_class: str  # its client's class name
    async_client_class: str  # its async client's class name

    @property
    def sdk(self) -> ModuleType:
        """The vendor's package, imported when a provider is first called: importing both SDKs takes 1–2 s, which
        every manage.py command and every worker would otherwise pay at start-up (bench/researcher.py)."""
        return importlib.import_module(self.sdk_name)

    async def sdk_loaded(self) -> None:
        """The vendor's package imported without holding up the event loop: a first import takes seconds of CPU
        (tens of seconds on a busy machine), during which an async server's loop would serve nobody, and gunicorn
        kills a worker whose loop is silent for its timeout. Servers import it before their workers fork
        (config/warm.py); this is for one that did not."""
        if self.sdk_name not in sys.modules:
            await asyncio.to_thread(importlib.import_module, self.sdk_name)

    def __init__(self) -> None:
        self._clients: dict[tuple, Any] = {}
        # async clients' connections belong to the event loop that opened them: one set of clients per loop
        self._async_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._signatures: dict[str, frozenset] = {}

    def client(self, provider, api_key: str):
        """The SDK client for this endpoint and key (built once per process; clients are thread-safe)."""
        with self._lock:
            return self._client_in(self._clients, provider, api_key, asynchronous=False)

    def async_client(self, provider, api_key: str):
        """The SDK's async client for this endpoint and key, built once per event loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            return self._client_in(
                self._async_clients.setdefault(loop, {}), provider, api_key, asynchronous=True
            )

    def _client_in(self, clients: dict, provider, api_key: str, *, asynchronous: bool):
        key = (provider.base_url or "", api_key, float(provider.timeout_seconds))
        client = clients.get(key)
        if client is None:
            if asynchronous:
                http_client = self.sdk.DefaultAsyncHttpxClient(transport=GuardedAsyncTransport())
            else:
                http_client = self.sdk.DefaultHttpxClient(transport=GuardedTransport())
            options = {
                # The SDKs refuse to build a client without a key, and given none they would read their vendor's
                # variable from the environment (and send it to this endpoint): a keyless endpoint gets a word
                # that is no one's key.
                "api_key": api_key or NO_KEY,
                "timeout": float(provider.timeout_seconds),
                "max_retries": 0,
                "http_client": http_client,
            }
            if provider.base_url:
                options["base_url"] = provider.base_url
            client = getattr(self.sdk, self.async_client_class if asynchronous else self.client_class)(
                **options
            )
            clients[key] = client
        return client

    # --- streaming: the wire format's events read by one loop, sync or async ----------------------------------

    @abstractmethod
    def stream_create(self, client) -> Callable:
        """The SDK's create call that streams this wire format (of the sync or the async client)."""

    def stream_body(self, body: dict) -> dict:
        """`body` as sent to stream."""
        return {**body, "stream": True}

    @abstractmethod
    def stream_start(self) -> dict:
        """What is known of the reply before its first event (filled in by `stream_event`)."""

    @abstractmethod
    def stream_event(self, data: dict, end: dict) -> str | None:
        """Read one streamed event (as JSON): its text, if any; what it says about the reply goes into `end`."""

    @abstractmethod
    def stream_end(self, end: dict) -> Reply:
        """The reply's metadata from what the events put in `end`."""

    def stream(self, *, provider, api_key: str, body: dict, timeout: float) -> Iterator[StreamChunk]:
        """The reply's text as the events bring it, then its metadata; `timeout` bounds the wait for each
        event."""
        create = self.stream_create(self.client(provider, api_key))
        end = self.stream_start()
        with (
            self.errors_classified(provider),
            create(**self.arguments(create, self.stream_body(body)), timeout=timeout) as events,
        ):
            for event in events:  # closed on the way out, also when the reader stops early
                text = self.stream_event(event.model_dump(exclude_none=True), end)
                if text:
                    yield StreamChunk(text=text)
        yield StreamChunk(end=self.stream_end(end), raw=end)

    async def astream(
        self, *, provider, api_key: str, body: dict, timeout: float
    ) -> AsyncIterator[StreamChunk]:
        """`stream` through the SDK's async client: no thread waits on the provider."""
        await self.sdk_loaded()
        create = self.stream_create(self.async_client(provider, api_key))
        end = self.stream_start()
        with self.errors_classified(provider):
            events = await create(**self.arguments(create, self.stream_body(body)), timeout=timeout)
            async with events:  # closed on the way out, also when the reader stops early
                async for event in events:
                    text = self.stream_event(event.model_dump(exclude_none=True), end)
                    if text:
                        yield StreamChunk(text=text)
        yield StreamChunk(end=self.stream_end(end), raw=end)

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
