import pytest


@pytest.fixture(autouse=True)
def _no_rate_limits(settings):
    """These tests drive many requests from one address; the limits are tested in tests/ops."""
    settings.RATELIMIT_ENABLED = False
