"""Provider limits that hold across every worker together: requests per minute, tokens per minute, concurrency.

Each limit is a GCRA (generic cell rate algorithm, a token bucket kept as one timestamp): requests are admitted
evenly spaced, with a small burst so a late worker can catch up, shaped so that no 60-second window ever holds more
than the provider's requests per minute (see `_shape`). Tokens work the same way, each request costing its
estimated tokens (corrected by the usage the provider reports, see `limiter_release`); a single request larger
than the token burst is still admitted when the bucket is otherwise empty.
Concurrency is a set of leases with an expiry, so a worker killed mid-call gives its slot back after `lease_seconds`.

With REDIS_URL set the state lives in Redis and is changed by one Lua script (atomic, and timed by the Redis
server's clock, so workers on different machines agree). Without Redis (`make run`, tasks in process) the same
algorithm runs in this process under a lock. Celery's own `rate_limit` is per worker and is not used.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

# Returns {admitted (0/1), wait seconds (string)}. KEYS: rpm tat, tpm tat, concurrency zset.
# ARGV: request interval, request burst, token interval, token burst, request tokens, max concurrency,
# lease seconds, lease id.
_ACQUIRE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local r_int = tonumber(ARGV[1])
local r_burst = tonumber(ARGV[2])
local t_int = tonumber(ARGV[3])
local t_burst = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local max_conc = tonumber(ARGV[6])
local lease = tonumber(ARGV[7])

redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if redis.call('ZCARD', KEYS[3]) >= max_conc then
  return {0, '0.05'}
end

local r_tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if r_tat < now then r_tat = now end
local r_new = r_tat + r_int
local r_wait = r_new - r_burst * r_int - now

if t_burst < cost then t_burst = cost end
local t_tat = tonumber(redis.call('GET', KEYS[2]) or '0')
if t_tat < now then t_tat = now end
local t_new = t_tat + cost * t_int
local t_wait = t_new - t_burst * t_int - now

local wait = math.max(r_wait, t_wait)
if wait > 0 then
  return {0, tostring(wait)}
end
redis.call('SET', KEYS[1], tostring(r_new), 'PX', math.ceil((r_new - now) * 1000) + 60000)
redis.call('SET', KEYS[2], tostring(t_new), 'PX', math.ceil((t_new - now) * 1000) + 60000)
redis.call('ZADD', KEYS[3], now + lease, ARGV[8])
redis.call('EXPIRE', KEYS[3], math.ceil(lease) + 60)
return {1, '0'}
"""

# Corrects the token bucket by (actual - estimated) tokens. KEYS: tpm tat. ARGV: seconds per token, delta.
_ADJUST_LUA = """
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local new = tonumber(cur) + tonumber(ARGV[2]) * tonumber(ARGV[1])
if new < now then new = now end
redis.call('SET', KEYS[1], tostring(new), 'PX', math.ceil((new - now) * 1000) + 60000)
return 1
"""


def _shape(per_minute: int) -> tuple[float, float]:
    """(interval in seconds per unit, burst in units) for a per-minute limit.

    GCRA admits at most burst + T / interval units in any window of T seconds. A small burst (up to one second's
    worth, at most 10 requests) lets a worker that woke late catch up instead of losing the slot, and the steady
    rate is lowered by the same amount, so no 60-second window ever exceeds the limit: burst + 60 / interval
    = per_minute."""
    burst = float(max(1, min(per_minute // 60, 10)))
    steady = per_minute - burst if per_minute > burst else per_minute
    return 60.0 / steady, burst


class RateLimitWait(Exception):
    """The limits do not admit a request within the caller's patience; try again after `retry_after` seconds."""

    def __init__(self, retry_after: float):
        super().__init__(f"provider limit reached: next slot in {retry_after:.2f}s")
        self.retry_after = retry_after


@dataclass(frozen=True)
class LimitSpec:
    key: str  # one namespace per provider (and database, so test and bench runs never share state)
    requests_per_minute: int
    tokens_per_minute: int
    max_concurrency: int
    lease_seconds: float

    @property
    def rpm_shape(self) -> tuple[float, float]:
        return _shape(self.requests_per_minute)

    @property
    def tpm_shape(self) -> tuple[float, float]:
        return _shape(self.tokens_per_minute)


@dataclass
class Lease:
    spec: LimitSpec
    lease_id: str
    tokens: int


class _RedisBackend:
    def __init__(self, url: str):
        import redis

        self.client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        self.acquire_script = self.client.register_script(_ACQUIRE_LUA)
        self.adjust_script = self.client.register_script(_ADJUST_LUA)

    def try_acquire(self, spec: LimitSpec, tokens: int, lease_id: str) -> tuple[bool, float]:
        admitted, wait = self.acquire_script(
            keys=[f"{spec.key}:rpm", f"{spec.key}:tpm", f"{spec.key}:conc"],
            args=[
                *spec.rpm_shape,
                *spec.tpm_shape,
                tokens,
                spec.max_concurrency,
                spec.lease_seconds,
                lease_id,
            ],
        )
        return bool(int(admitted)), float(wait)

    def release(self, spec: LimitSpec, lease_id: str) -> None:
        self.client.zrem(f"{spec.key}:conc", lease_id)

    def adjust(self, spec: LimitSpec, delta_tokens: int) -> None:
        self.adjust_script(keys=[f"{spec.key}:tpm"], args=[spec.tpm_shape[0], delta_tokens])

    def reset(self, spec: LimitSpec) -> None:
        self.client.delete(f"{spec.key}:rpm", f"{spec.key}:tpm", f"{spec.key}:conc")


class _LocalBackend:
    """The same algorithm for one process (tasks run in process when there is no broker)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.tats: dict[str, float] = {}
        self.leases: dict[str, dict[str, float]] = {}

    def try_acquire(self, spec: LimitSpec, tokens: int, lease_id: str) -> tuple[bool, float]:
        with self.lock:
            now = time.monotonic()
            leases = self.leases.setdefault(spec.key, {})
            for lid, expiry in list(leases.items()):
                if expiry <= now:
                    del leases[lid]
            if len(leases) >= spec.max_concurrency:
                return False, 0.05
            r_int, r_burst = spec.rpm_shape
            r_new = max(self.tats.get(spec.key + ":rpm", 0.0), now) + r_int
            r_wait = r_new - r_burst * r_int - now
            t_int, t_burst = spec.tpm_shape
            t_burst = max(t_burst, tokens)
            t_new = max(self.tats.get(spec.key + ":tpm", 0.0), now) + tokens * t_int
            t_wait = t_new - t_burst * t_int - now
            wait = max(r_wait, t_wait)
            if wait > 0:
                return False, wait
            self.tats[spec.key + ":rpm"] = r_new
            self.tats[spec.key + ":tpm"] = t_new
            leases[lease_id] = now + spec.lease_seconds
            return True, 0.0

    def release(self, spec: LimitSpec, lease_id: str) -> None:
        with self.lock:
            self.leases.get(spec.key, {}).pop(lease_id, None)

    def adjust(self, spec: LimitSpec, delta_tokens: int) -> None:
        with self.lock:
            key = spec.key + ":tpm"
            if key in self.tats:
                self.tats[key] = max(self.tats[key] + delta_tokens * spec.tpm_shape[0], time.monotonic())

    def reset(self, spec: LimitSpec) -> None:
        with self.lock:
            self.tats.pop(spec.key + ":rpm", None)
            self.tats.pop(spec.key + ":tpm", None)
            self.leases.pop(spec.key, None)


_backend_lock = threading.Lock()
_backends: dict[str, object] = {}


def _backend():
    url = settings.REDIS_URL
    with _backend_lock:
        if url not in _backends:
            _backends[url] = _RedisBackend(url) if url else _LocalBackend()
        return _backends[url]


def limit_spec_for(provider) -> LimitSpec:
    """The limits of a generation.Provider row, namespaced by database so separate deployments never share."""
    db = connection.settings_dict.get("NAME") or "default"
    return LimitSpec(
        key=f"genlimit:{db}:{provider.pk}",
        requests_per_minute=provider.requests_per_minute,
        tokens_per_minute=provider.tokens_per_minute,
        max_concurrency=provider.max_concurrency,
        lease_seconds=float(provider.timeout_seconds) + 30.0,
    )


def limiter_acquire(*, spec: LimitSpec, tokens: int, max_wait: float) -> Lease:
    """Block until the provider's limits admit one request costing `tokens`, and hold one concurrency slot.

    Guarantees: across every process sharing the backend, requests are spaced so RPM and TPM hold, and no more
    than max_concurrency leases are held at once. Raises RateLimitWait if admission would take longer than
    max_wait seconds (the caller re-queues instead of holding a worker). Release the lease with limiter_release."""
    lease_id = uuid.uuid4().hex
    backend = _backend()
    deadline = time.monotonic() + max_wait
    while True:
        admitted, wait = backend.try_acquire(spec, tokens, lease_id)
        if admitted:
            return Lease(spec=spec, lease_id=lease_id, tokens=tokens)
        if time.monotonic() + wait > deadline:
            raise RateLimitWait(retry_after=wait)
        # A little jitter so waiting workers do not all ask again at the same instant.
        time.sleep(min(wait, 1.0) + random.uniform(0, 0.005))


def limiter_release(*, lease: Lease, actual_tokens: int | None = None) -> None:
    """Give the concurrency slot back and correct the token bucket by what the provider reported using."""
    backend = _backend()
    backend.release(lease.spec, lease.lease_id)
    if actual_tokens is not None and actual_tokens != lease.tokens:
        backend.adjust(lease.spec, actual_tokens - lease.tokens)


def limiter_reset(*, spec: LimitSpec) -> None:
    """Forget a provider's limiter state (tests and benchmarks start from a clean slate)."""
    _backend().reset(spec)
