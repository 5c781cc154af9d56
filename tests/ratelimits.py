"""Switching the rate limits on for a test: counted in Redis afresh, at limits the test chooses."""

from __future__ import annotations

from django.core.cache import caches

WINDOW_MIDDLE = 1_700_000_010.0  # 10 s into a window of the limiter


def rate_limits_on(
    settings, monkeypatch=None, *, entry: int = 1000, participant: int = 1000, now=WINDOW_MIDDLE
):
    """Rate limits on at these per-minute limits (entry per address, per participant), no trusted proxy, the
    counts cleared; with `monkeypatch`, the limiter's clock pinned at `now` so every request falls in one window.
    Returns `settings` for the test to lower the limit it is about."""
    from config import ratelimit

    if monkeypatch is not None:
        monkeypatch.setattr(ratelimit, "_now", lambda: now)
    settings.RATELIMIT_ENABLED = True
    settings.RATELIMIT_ENTRY_PER_IP = entry
    settings.RATELIMIT_PARTICIPANT = participant
    settings.RATELIMIT_TRUSTED_PROXIES = 0
    caches["default"].clear()
    return settings
