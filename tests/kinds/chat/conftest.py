import pytest

from generation.providers.placeholder import PlaceholderAdapter
from kinds.chat.demo import MODEL_SOURCE, chat_demo_create
from kinds.chat.models import ChatSettings
from tests.generation.conftest import api_key  # noqa: F401 (the loopback provider's key, a fixture)
from tests.kinds.chat.walking import sources_enrolling


@pytest.fixture
def fast_model(monkeypatch):
    monkeypatch.setattr(PlaceholderAdapter, "word_seconds", 0.0)


@pytest.fixture
def chat_demo(db, fast_model):
    """chat-demo with its test model the only source taking participants (no responder needed)."""
    study = chat_demo_create()
    ChatSettings.objects.filter(study=study).update(min_reply_wait_ms=0)
    sources_enrolling(study, MODEL_SOURCE)
    study.refresh_from_db()
    return study
