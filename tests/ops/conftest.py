import pytest

from tests.ratelimits import rate_limits_on


@pytest.fixture
def limits_on(settings, redis_url, monkeypatch):
    """Rate limits switched on, high, counted in Redis afresh, every request of the test in the same window
    (the middle of one); returns `settings` for the test to lower the limit it is about."""
    rate_limits_on(settings, monkeypatch)
    settings.RATELIMIT_ENROLL_PER_STUDY = 1000
    return settings
