"""The live chat demo `chat-demo`: a conversation about one of the demo's situations (or the participant's own) with
one of two sources, balanced — the test model (it streams its placeholder replies word by word: no key, no network)
or a person typing at the responder console (`/analysis/chat-demo/chat/console/`; the superuser `admin` of
`make run` may answer there) —, crossed with the label shown ("an AI" or "a person"), and the debrief that label
needs. A person has `PERSON_REPLY_SECONDS` to answer each message; past it the fallback (the test model) does."""

from __future__ import annotations

from django.db import transaction

from generation.models import LLMConditionConfig, Provider
from generation.providers.placeholder import MODEL, PlaceholderAdapter
from studies.authenticity_models import NEW_STUDY_TRAPS
from studies.demo.seed import demo_situations_add
from studies.demo.texts import TAKING_PART
from studies.models import Condition, Study
from studies.services import study_launch

from .models import ChatSettings

CHAT_SLUG = "chat-demo"
PROVIDER = "test-model"
MODEL_SOURCE = "test-model"
PERSON = "person"
PERSON_REPLY_SECONDS = (
    60  # a person's time limit a reply: short enough to see the fallback answer in the demo
)

CONSENT = f"""\
This is a demonstration of a research study about empathy in written conversations.

You will read a short situation that stirs emotions, imagine it happened to you, and talk about it for a few \
messages. Then you will say how the conversation felt. It takes about ten minutes.

{TAKING_PART} Please do not write anything that could identify you or anyone else.

If you agree to take part, choose "I agree" below."""

DEBRIEF = f"""\
Thank you. Before you go, something you need to know: in this study, what you were told about who answered \
you was assigned at random, and it was not always true. Who actually answered was assigned at random too, \
separately: some participants talked with a computer program (in this demonstration, a test model that puts \
together stock sentences), others with a person typing the replies. When the person did not answer a message within \
{PERSON_REPLY_SECONDS} seconds, the computer program answered it instead.

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
    "description": "Seeded by `manage.py seed_demo`: a live conversation with the test model or a person at the "
    "responder console, source × label.",
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
        _llm(study, MODEL_SOURCE, provider, enrolling=True, position=0)
        Condition.objects.create(
            study=study, name=PERSON, kind=Condition.Kind.HUMAN, enrolling=True, position=1
        )
        fallback = _llm(study, "fallback", provider, enrolling=False, position=2)
        demo_situations_add(study)
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
            person_reply_seconds=PERSON_REPLY_SECONDS,
        )
        study_launch(study=study, dry_run=True)
    return study
