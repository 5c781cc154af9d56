"""The responder console in headless Chromium: a participant assigned the person source talks with a responder
typing in a second browser, waits with the stated wait, and gets the design's fallback when no responder
answers inside the time limit. The console is axe-clean at 390×844 and 1280×800 (SCREENSHOTS=DIR keeps them)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from generation.models import LLMConditionConfig, Provider
from generation.providers.placeholder import MODEL, PlaceholderAdapter
from kinds.chat import turns
from kinds.chat.console import responders_group
from kinds.chat.models import ChatSettings, Conversation, Turn
from studies.models import Condition, Study
from studies.services import study_launch
from tests.a11y import axe_violations
from tests.factories import StudyFactory
from tests.screenshots import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "a-long-test-password"
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


def person_source_study() -> Study:
    """A live chat study whose only enrolling source is a person, the test model as the fallback."""
    study = StudyFactory(
        slug="chat-people", kind="chat", platform=Study.Platform.PROLIFIC, quota_per_condition=50
    )
    Condition.objects.create(
        study=study, name="person", kind=Condition.Kind.HUMAN, is_baseline=True, position=0
    )
    provider = Provider.objects.create(
        name="test-model", kind=PlaceholderAdapter.kind, requests_per_minute=6000
    )
    fallback = Condition.objects.create(
        study=study, name="fallback", kind=Condition.Kind.LLM, enrolling=False, position=1
    )
    LLMConditionConfig.objects.create(
        condition=fallback, provider=provider, model=MODEL, system_prompt="Be kind."
    )
    ChatSettings.objects.create(
        study=study, opening=ChatSettings.Opening.OWN, min_turns=1, max_turns=3, min_chars=5, min_reply_wait_ms=0,
        labels=["ai", "person"], debrief_text="Who answered you was assigned at random.", fallback_condition=fallback,
        person_reply_seconds=60,
    )  # fmt: skip
    study_launch(study=study, dry_run=True)
    return study


def test_a_responder_answers_a_participant_and_the_fallback_answers_when_nobody_does(
    live_server, browser, monkeypatch
):
    # The participant is told the time limit once a person is slower than STATED_WAIT_AFTER (5 s on the site):
    # 1 s here, so the test does not sit through the other four.
    monkeypatch.setattr(turns, "STATED_WAIT_AFTER", timedelta(seconds=1))
    study = person_source_study()
    user = get_user_model().objects.create_user(username="responder", password=PASSWORD, is_staff=True)
    user.groups.add(responders_group())

    contexts = [browser.new_context(viewport=SIZES["phone"], is_mobile=True, has_touch=True)]
    participant = contexts[0].new_page()
    participant.set_default_timeout(30_000)
    participant.goto(f"{live_server.url}/s/{study.slug}/?PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X1")
    participant.get_by_role("button", name="I agree, start the study").click()
    participant.fill("#own_text", "My dog died this morning and I cannot stop crying.")
    participant.get_by_role("button", name="Send it and start").click()
    expect(participant.locator("#chat-log")).to_contain_text("My dog died")
    # the participant waits, told for how long at most, in words that do not say who writes
    expect(participant.locator("#chat-status")).to_contain_text("It can take up to 1 minute", timeout=15_000)
    screenshot(participant, "chat-participant-waiting-phone")

    contexts.append(browser.new_context(viewport=SIZES["desktop"]))
    console = contexts[1].new_page()
    console.set_default_timeout(30_000)
    console.goto(f"{live_server.url}/analysis/{study.slug}/chat/console/")
    console.fill("#id_username", "responder")
    console.fill("#id_password", PASSWORD)
    console.get_by_role("button", name="Sign in").click()
    expect(console.locator("#queue-count")).to_contain_text("1 conversation waiting")
    violations = []
    for size, viewport in SIZES.items():
        console.set_viewport_size(viewport)
        violations += axe_violations(console)
        screenshot(console, f"chat-console-queue-{size}")
    console.get_by_role("button", name="Take the next conversation").click()
    expect(console.locator(".console-transcript")).to_contain_text("My dog died this morning")
    for size, viewport in SIZES.items():
        console.set_viewport_size(viewport)
        violations += axe_violations(console)
        screenshot(console, f"chat-console-held-{size}")
    assert not violations, violations
    console.fill("textarea[name=text]", "I am so sorry. Losing a dog is losing family. What was their name?")
    console.get_by_role("button", name="Send reply").click()
    expect(console.locator(".console-messages")).to_contain_text("Your reply was sent.")

    log = participant.locator("#chat-log")
    expect(log).to_contain_text("Losing a dog is losing family", timeout=30_000)
    conversation = Conversation.objects.get(participant__external_id="P1")
    reply = conversation.turns.get(index=1)
    assert (reply.responder_id, reply.condition.name, reply.status) == (
        user.pk,
        "person",
        Turn.Status.COMPLETE,
    )

    # nobody takes the next message: past the time limit the fallback answers it
    contexts.pop().close()  # the responder leaves
    ChatSettings.objects.filter(study=study).update(person_reply_seconds=1)
    participant.fill("#message", "Her name was Bella. She was fourteen.")
    participant.get_by_role("button", name="Send").click()
    expect(log.locator(".chat-responder")).to_have_count(2, timeout=30_000)
    expect(participant.locator("#chat-compose")).to_be_visible()  # the reply is complete: the turn is back
    screenshot(participant, "chat-participant-fallback-phone")
    conversation.refresh_from_db()
    fallback_reply = conversation.turns.get(index=3)
    assert fallback_reply.condition.name == "fallback" and fallback_reply.responder_id is None
    assert conversation.fallback_used
    assert list(conversation.turns.order_by("index").values_list("role", flat=True)) == [
        "participant", "responder", "participant", "responder"
    ]  # fmt: skip
    contexts[0].close()
