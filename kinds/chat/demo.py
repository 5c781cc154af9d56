"""The live chat demo `chat-demo`: a conversation with the test model (it streams its placeholder replies word by
word: no key, no network), about one of the demo's situations, with the label shown ("an AI" or "a person") as
the second factor, and the debrief that label needs."""

from __future__ import annotations

from django.db import transaction

from generation.models import LLMConditionConfig, Provider
from generation.providers.placeholder import MODEL, PlaceholderAdapter
from studies.authenticity_models import NEW_STUDY_TRAPS
from studies.demo.seed import _demo_situations
from studies.demo.texts import TAKING_PART
from studies.models import Condition, Study, StudySituation
from studies.services import study_launch

from .models import ChatSettings

CHAT_SLUG = "chat-demo"
PROVIDER = "test-model"

CONSENT = f"""\
This is a demonstration of a research study about empathy in written conversations.

You will read a short situation that stirs emotions, imagine it happened to you, and talk about it for a few \
messages. Then you will say how the conversation felt. It takes about ten minutes.

{TAKING_PART} Please do not write anything that could identify you or anyone else.

If you agree to take part, choose "I agree" below."""

DEBRIEF = """\
Thank you. Before you go, something you need to know: in this study, what you were told about who answered \
you was assigned at random, and it was not always true. Every reply in this demonstration was written by a \
computer program (a test model that puts together stock sentences), whatever the page said.

We told some participants "an AI" and others "a person" because how people judge a reply may depend on who they \
think wrote it. Your answers help us measure that. If you would rather your answers were not used, use the \
contact on the study's page and we will remove them."""

SYSTEM_PROMPT = (
    "You are talking with someone about a situation that stirred their emotions. Reply briefly and warmly, in "
    "two or three sentences."
)

SETTINGS = {
    **NEW_STUDY_TRAPS,
    "kind": "chat",
    "title": "Demo: a conversation about a situation",
    "description": "Seeded by `manage.py seed_demo`: a live conversation with the test model, label × source.",
    "consent_text": CONSENT,
    "instructions_text": "",
    "quota_per_condition": 200,
    "seed": 2026,
    "platform": Study.Platform.PROLIFIC,
    "completion_code": "CHAT-COMPLETE",
    "screened_out_code": "CHAT-NOCONSENT",
    "failed_checks_code": "CHAT-CHECKS",
    "completion_redirect_url": "",
    "time_limit_minutes": 40,
}


def _llm(study: Study, name: str, provider: Provider, *, enrolling: bool, position: int) -> Condition:
    condition = Condition.objects.create(
        study=study, name=name, kind=Condition.Kind.LLM, enrolling=enrolling, position=position
    )
    LLMConditionConfig.objects.create(
        condition=condition, provider=provider, model=MODEL, system_prompt=SYSTEM_PROMPT, max_tokens=200
    )
    return condition


def chat_demo_create() -> Study:
    """The live study `chat-demo`, created if missing (left as it is otherwise)."""
    study = Study.objects.filter(slug=CHAT_SLUG).first()
    if study is not None:
        return study
    with transaction.atomic():
        provider, _ = Provider.objects.get_or_create(
            name=PROVIDER, defaults={"kind": PlaceholderAdapter.kind, "requests_per_minute": 6000}
        )
        study = Study.objects.create(slug=CHAT_SLUG, **SETTINGS)
        _llm(study, "test-model", provider, enrolling=True, position=0)
        fallback = _llm(study, "fallback", provider, enrolling=False, position=1)
        StudySituation.objects.bulk_create(
            [StudySituation(study=study, situation=s) for s in _demo_situations()]
        )
        ChatSettings.objects.create(
            study=study,
            opening=ChatSettings.Opening.EITHER,
            min_turns=2,
            max_turns=4,
            min_chars=5,
            min_reply_wait_ms=1200,
            labels=["ai", "person"],
            debrief_text=DEBRIEF,
            fallback_condition=fallback,
        )
        study_launch(study=study, dry_run=True)
    return study
