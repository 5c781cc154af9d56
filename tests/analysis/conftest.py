import pytest
from django.contrib.auth.models import Group

from analysis.permissions import ANALYSTS_GROUP

from .builders import Rated, build_rating_study, participants_from_counts


@pytest.fixture(autouse=True)
def _fresh_analysis_cache():
    """Each test starts without computed dashboards (this suite's own cache database: nothing else lives there
    that a test needs)."""
    from django.core.cache import cache

    try:
        cache.clear()
    except Exception:  # noqa: BLE001 — a test that takes the cache down sets its own CACHES
        pass
    yield


@pytest.fixture
def rated_study(db):
    """human: 10 participants (Bad 30, Okay 50, Good 20); gpt4: 10 (Bad 20, Okay 40, Good 40); each participant
    rates 10 responses of one emotion (sad or joyful)."""
    people = participants_from_counts("human", {1: 15, 2: 25, 3: 10}, emotion="sad")
    people += participants_from_counts("human", {1: 15, 2: 25, 3: 10}, emotion="joyful")
    people += participants_from_counts("gpt4", {1: 10, 2: 20, 3: 20}, emotion="sad")
    people += participants_from_counts("gpt4", {1: 10, 2: 20, 3: 20}, emotion="joyful")
    return build_rating_study(slug="rated", conditions=["human", "gpt4"], participants=people).study


@pytest.fixture
def hostile_study(db):
    """Participant-visible texts that a spreadsheet would run as formulas."""
    people = [Rated("human", [("sad", 2, 3000), ("sad", 3, 3000)], external_id='=HYPERLINK("http://x")')]
    return build_rating_study(
        slug="hostile", conditions=["human"], participants=people, response_text="=1+2 @SUM(A1) -cmd"
    ).study


@pytest.fixture
def analyst(django_user_model):
    user = django_user_model.objects.create_user(username="ana", password="analyst-pass-123")
    user.groups.add(Group.objects.get_or_create(name=ANALYSTS_GROUP)[0])
    return user


@pytest.fixture
def analyst_client(client, analyst):
    client.force_login(analyst)
    return client
