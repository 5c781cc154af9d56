"""Sessions read from Redis and kept in the database: Django's `cached_db` store, made safe for a Redis
that is down.

Every participant page reads the session, so reading it from Redis instead of PostgreSQL takes a query
off each request. The database stays the record: a session missing from the cache (Redis restarted,
evicted) is read from the database and put back. Django's store already survives a failed cache write
on save; this one also survives a failed cache read, write or delete anywhere else (loading a session,
checking that a new key is free, deleting),
so participants keep going while Redis is stopped (bench/faults.py).
"""

from __future__ import annotations

import logging

from django.contrib.sessions.backends import cached_db, db

logger = logging.getLogger("django.contrib.sessions")


class SessionStore(cached_db.SessionStore):
    def load(self):
        try:
            data = self._cache.get(self.cache_key)
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
