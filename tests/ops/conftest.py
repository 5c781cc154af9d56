import pytest
from django.core.cache import caches


@pytest.fixture
def limits_on(settings, redis_url, monkeypatch):
    """Rate limits switched on, high, counted in Redis afresh, every request of the test in the same window
    (the middle of one); returns `settings` for the test to lower the limit it is about."""
    from config import ratelimit

    monkeypatch.setattr(ratelimit, "_now", lambda: 1_700_000_010.0)
    settings.RATELIMIT_ENABLED = True
    settings.RATELIMIT_ENTRY_PER_IP = 1000
    settings.RATELIMIT_PARTICIPANT = 1000
    settings.RATELIMIT_TRUSTED_PROXIES = 0
    settings.RATELIMIT_ENROLL_PER_STUDY = 1000
    caches["default"].clear()
    return settings
