"""Sessions read from Redis and kept in the database: Django's `cached_db` store, made safe for a Redis
that is down.

Every participant page reads the session, so reading it from Redis instead of PostgreSQL takes a query
off each request. The database stays the record: a session missing from the cache (Redis restarted,
evicted) is read from the database and put back. Django's store already survives a failed cache write
on save; this one also survives a failed cache read, write or delete anywhere else (loading a session,
checking that a new key is free, deleting),
so participants keep going while Redis is stopped (bench/faults.py).

The cached copy can also be fetched by someone else in a round trip they make anyway: the rate limiter
(config/ratelimit.py) reads it in the pipeline that counts the request (`cached_copy_key`, then
`cached_copy_take`), so a participant page makes one round trip to Redis instead of two.
"""

from __future__ import annotations

import logging

from django.contrib.sessions.backends import cached_db, db
from django.contrib.sessions.backends.base import VALID_KEY_CHARS, CreateError, UpdateError
from django.db import DatabaseError, IntegrityError, connections, router
from django.utils.crypto import get_random_string

logger = logging.getLogger("django.contrib.sessions")


_NOT_FETCHED = object()


class SessionStore(cached_db.SessionStore):
    _fetched = _NOT_FETCHED  # what `cached_copy_take` was given: the cached copy, or None when there is none

    def cached_copy_key(self, redis_url: str) -> str | None:
        """The Redis key of this session's cached copy, for a caller about to send other commands to
        the Redis at `redis_url` (see `cached_copy_take`); None when there is nothing to fetch there (no
        valid session cookie, the session already read, or the cache on another server)."""
        if hasattr(self, "_session_cache") or self.session_key is None:
            return None
        if getattr(self._cache, "_servers", None) != [redis_url]:
            return None
        return self._cache.make_and_validate_key(self.cache_key)

    def cached_copy_take(self, raw: bytes | None) -> None:
        """The raw value the caller fetched under `cached_copy_key`: the session is read from it, as
        `load` would have read it from the cache, when the session is first used (None: not cached,
        the session is read from the database). Nothing is read when the session is never used."""
        self._fetched = raw

    def load(self):
        fetched, self._fetched = self._fetched, _NOT_FETCHED
        try:
            if fetched is _NOT_FETCHED:
                data = self._cache.get(self.cache_key)
            else:  # as the cache's own `get` decodes what it reads
                data = None if fetched is None else self._cache._cache._serializer.loads(fetched)
        except Exception:
            data = None
        if data is not None:
            return data
        stored = self._get_session_from_db()
        if not stored:
            return {}
        data = self.decode(stored.session_data)
        try:
            self._cache.set(self.cache_key, data, self.get_expiry_age(expiry=stored.expire_date))
        except Exception:
            logger.warning("session cache unavailable; read from the database")
        return data

    def save(self, must_create=False):
        """Django's `save`, without the transaction Django opens around the row's one statement (BEGIN and
        COMMIT: three round trips where one does) unless another transaction is open: there the savepoint
        keeps a refused INSERT from breaking the enclosing transaction. Outside one, the INSERT or UPDATE
        commits by itself, and a refused INSERT changes nothing. Then the cached copy, as Django writes it.

        A new session goes straight to `create`, which comes back here with its key: Django's store would
        write the cached copy a second time after `create` returns (one more round trip to Redis)."""
        if self.session_key is None:
            return self.create()
        using = router.db_for_write(self.model)
        if connections[using].in_atomic_block:  # a savepoint keeps a refused INSERT from breaking it
            return super().save(must_create)
        obj = self.create_model_instance(self._get_session(no_load=must_create))
        try:
            obj.save(force_insert=must_create, force_update=not must_create, using=using)
        except IntegrityError:
            if must_create:
                raise CreateError from None
            raise
        except DatabaseError:
            if not must_create:
                raise UpdateError from None
            raise
        try:
            self._cache.set(self.cache_key, self._session, self.get_expiry_age())
        except Exception:
            logger.exception("Error saving to cache (%s)", self._cache)  # as Django's store says it

    def _get_new_session_key(self):
        """A fresh random key, without first asking the cache and then the database whether it is taken (one
        round trip to Redis and one query on every enrolment): every new key reaches the database through
        `create`, as an INSERT that the primary key refuses for a taken one, and `create` then draws again."""
        return get_random_string(32, VALID_KEY_CHARS)

    def exists(self, session_key):
        try:
            return super().exists(session_key)
        except Exception:
            return db.SessionStore.exists(self, session_key)

    def delete(self, session_key=None):
        try:
            super().delete(session_key)
        except Exception:
            # The database row is gone (super deletes it first); a stale cache entry expires by itself.
            logger.warning("session cache unavailable; session deleted from the database only")
