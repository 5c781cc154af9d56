"""Celery beat that sends only while it leads: a second beat started by mistake (or one left over while a
Deployment is replaced) sends nothing, so no periodic task runs twice in its interval.

Each send also takes a Redis key of its task for nine tenths of its interval (`SENT_KEY`): a task another beat
(or this one before a restart) sent within that time is not sent again, so not even a change of leader, nor a
beat restarted right after a send, runs a task twice.

The leader holds a Redis key (`LEADER_KEY`) for `LEASE_SECONDS`, renewing it every tick (ticks are at most
`LEASE_SECONDS / 3` apart); a beat that does not hold it only checks again. When the leader stops, it gives the
key back; when it dies, the key lapses and the other beat leads within `LEASE_SECONDS`. It then runs each task
on its own schedule from its start, which the sent keys hold back. Without Redis nobody leads, and nothing could be sent anyway."""

from __future__ import annotations

import logging
import os
import socket
import uuid

import redis
from celery.beat import PersistentScheduler

logger = logging.getLogger(__name__)

LEADER_KEY = "celery-beat:leader"
SENT_KEY = "celery-beat:sent"
LEASE_SECONDS = 30

# Renews the lease only if this beat still holds it (compare and extend, atomically).
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class LeaderScheduler(PersistentScheduler):
    def __init__(self, *args, **kwargs):
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"
        self.leading = False
        super().__init__(*args, **kwargs)
        self.max_interval = min(self.max_interval, LEASE_SECONDS / 3)
        self.redis = redis.Redis.from_url(
            self.app.conf.broker_url, socket_timeout=2, socket_connect_timeout=2
        )

    def lead(self) -> bool:
        """Take or renew the lease; whether this beat leads now."""
        lease_ms = LEASE_SECONDS * 1000
        try:
            held = self.redis.eval(_RENEW, 1, LEADER_KEY, self.token, lease_ms) or self.redis.set(
                LEADER_KEY, self.token, nx=True, px=lease_ms
            )
        except redis.RedisError as error:
            logger.warning("beat cannot reach Redis to lead (%s): sending nothing", type(error).__name__)
            held = False
        if bool(held) != self.leading:
            logger.info("beat %s %s", self.token, "leads" if held else "follows: another beat leads")
        self.leading = bool(held)
        return self.leading

    def tick(self, *args, **kwargs):
        if not self.lead():
            return self.max_interval
        return min(super().tick(*args, **kwargs), self.max_interval)

    def apply_entry(self, entry, producer=None):
        every = getattr(entry.schedule, "run_every", None)
        if every is not None:
            window_ms = max(1, int(every.total_seconds() * 900))
            try:
                fresh = self.redis.set(f"{SENT_KEY}:{entry.name}", self.token, nx=True, px=window_ms)
            except redis.RedisError:
                fresh = False
            if not fresh:
                logger.info("beat: %s was sent within its interval already: not sent again", entry.name)
                return
        super().apply_entry(entry, producer=producer)

    def close(self):
        try:
            self.redis.eval(_RELEASE, 1, LEADER_KEY, self.token)
        except redis.RedisError:
            pass  # the lease lapses by itself
        super().close()
