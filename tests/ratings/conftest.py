import pytest


@pytest.fixture(autouse=True)
def _no_rate_limits(settings):
    """These tests drive many requests from one address; the limits are tested in tests/ops."""
    settings.RATELIMIT_ENABLED = False


@pytest.fixture
def pages_uncached():
    """The participant pages' shared cache (ratings/shared_pages.py) empty, as in a new worker."""
    from django.core.cache import caches

    from ratings import shared_pages

    caches[shared_pages.CACHE_ALIAS].clear()


@pytest.fixture
def person_page(page_at):
    """A factory of pages in a person's browser (`page_at(..., person=True)`): a 390×844 phone or a 1280×800
    desktop."""

    def make(*, javascript: bool = True, phone: bool = False):
        return page_at("phone" if phone else "desktop", javascript=javascript, person=True)

    return make


@pytest.fixture
def pages_seconds_apart(monkeypatch):
    """Each page reaches the server 20 s after the one before, as a reader's would: the signals the tests send say a page
    was on screen for up to 12 s, which the server checks against when it served the page."""
    from datetime import timedelta

    from django.utils import timezone

    from studies import authenticity

    clock = [timezone.now()]

    class Clock:
        @staticmethod
        def now():
            clock[0] += timedelta(seconds=20)
            return clock[0]

    monkeypatch.setattr(authenticity, "timezone", Clock)
