import pytest


@pytest.fixture(autouse=True)
def _no_rate_limits(settings):
    """These tests drive many requests from one address; the limits are tested in tests/ops."""
    settings.RATELIMIT_ENABLED = False


@pytest.fixture(autouse=True, scope="session")
def _urls_loaded():
    """Loads the whole URLconf (and the modules its views import) once, up front: otherwise the first page a
    browser test opens pays for those imports and can run into the browser's navigation timeout."""
    from django.urls import reverse

    reverse("ratings:entry", kwargs={"slug": "warm-up"})


@pytest.fixture
def pages_uncached():
    """The participant pages' shared cache (ratings/shared_pages.py) empty, as in a new worker."""
    from django.core.cache import caches

    from ratings import shared_pages

    caches[shared_pages.CACHE_ALIAS].clear()


@pytest.fixture(params=["statement", "view"])
def path(request, settings):
    """Both ways a background post is answered: the answer path's statements (PostgreSQL), and the view."""
    if request.param == "statement":
        request.getfixturevalue("requires_postgres")
    else:
        settings.PARTICIPANT_ANSWER_PATH = False
    return request.param


@pytest.fixture
def answers_taken(monkeypatch):
    """A list that gets, for every in-place answer the one-statement path (ratings/answer_path.py) runs,
    whether it answered it (True) or left it to the view (False)."""
    from ratings import answer_path

    taken = []
    answer_in_place = answer_path.answer_in_place

    def counted(request, **kwargs):
        reply = answer_in_place(request, **kwargs)
        taken.append(reply is not None)
        return reply

    monkeypatch.setattr(answer_path, "answer_in_place", counted)
    return taken
