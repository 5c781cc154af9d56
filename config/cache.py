"""Django's Redis cache backend, keeping one client per connection pool.

Django's `RedisCacheClient.get_client` builds a new `redis.Redis` object on every cache call (cheap-looking,
but it sets up a command table and callbacks each time): ~4 % of a worker's CPU on participant pages,
which read the session from this cache on every request (bench/participants.py, py-spy). The clients
are thread-safe and share the pool, so one per pool is enough.
"""

from __future__ import annotations

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient


class _Client(RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class RedisCache(DjangoRedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = _Client
