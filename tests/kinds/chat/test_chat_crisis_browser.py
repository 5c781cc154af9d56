"""The crisis path and the polite close of chat-demo in headless Chromium, phone 390×844 and desktop 1280×800,
JavaScript on and off: a message that names a crisis brings the support resources instead of a reply; the
participant ends the conversation there and still rates it, reads the debrief and gets the completion code. A
study whose budget is spent mid-conversation closes it with a note and the participant goes on to the rating.
axe-core clean on every page; screenshots when SCREENSHOTS names a directory."""

from __future__ import annotations

from decimal import Decimal

import pytest
from playwright.sync_api import expect

from generation.budget import StudyBudget
from generation.live_models import LiveCall
from generation.models import Provider
from kinds.chat.demo import MODEL_SOURCE
from kinds.chat.models import ChatSettings, Conversation
from studies.models import Participant
from tests.a11y import axe_violations
from tests.kinds.chat.walking import demo_live
from tests.screenshots import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo(settings, tmp_path, live_server, monkeypatch):
    """chat-demo with its new participants going to the test model (its person source closed to enrolment)."""
    info = demo_live(settings, tmp_path, live_server, monkeypatch, MODEL_SOURCE)
    ChatSettings.objects.filter(study__slug="chat-demo").update(min_reply_wait_ms=0)
    return info


@pytest.mark.parametrize("viewport", ["phone", "desktop"])
@pytest.mark.parametrize("javascript", [True, False], ids=["js", "nojs"])
def test_a_crisis_message_shows_the_resources_and_the_participant_ends_with_their_code(
    demo, page_at, viewport, javascript
):
    page = page_at(viewport)
    page.set_default_timeout(30_000)  # the shared machine is loaded: a page may take seconds to answer
    if not javascript:
        page.context.route("**/static/**/*.js", lambda route: route.abort())
    name = f"chat-crisis-{viewport}-{'js' if javascript else 'nojs'}"
    problems: list[str] = []
    page.goto(demo.kind_links["chat"])
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="Start the conversation about it").click()
    expect(page.locator("h1")).to_have_text("Conversation")
    page.get_by_label("Your message").fill("Some nights I keep thinking about killing myself.")
    page.get_by_role("button", name="Send").click()

    expect(page.locator("h1")).to_have_text("Before you go on")
    expect(page.get_by_role("heading", name="Where to find support now")).to_be_visible()
    expect(page.get_by_role("link", name="https://findahelpline.com")).to_be_visible()
    problems += axe_violations(page)
    screenshot(page, f"{name}-1-resources")
    assert not LiveCall.objects.exists()  # no model was asked for a reply to it

    page.get_by_role("button", name="End the conversation and continue").click()
    expect(page.locator("h1")).to_have_text("About the conversation")
    page.get_by_label("Okay").check()
    problems += axe_violations(page)
    page.get_by_role("button", name="Continue").click()
    expect(page.locator("h1")).to_have_text("About this study")
    page.get_by_role("button", name="I have read this, finish").click()
    expect(page.get_by_text("CHAT-COMPLETE")).to_be_visible()
    problems += axe_violations(page)
    screenshot(page, f"{name}-2-done")
    assert problems == []

    participant = Participant.objects.get(study__slug="chat-demo", external_id__startswith="demo-")
    conversation = Conversation.objects.get(participant=participant)
    assert participant.status == "completed" and conversation.state == "ended_crisis"
    assert conversation.crisis_count == 1 and conversation.turns.get().safety["terms"] == ["killing myself"]


@pytest.mark.parametrize("viewport", ["phone", "desktop"])
@pytest.mark.parametrize("javascript", [True, False], ids=["js", "nojs"])
def test_a_spent_budget_closes_the_conversation_with_a_note_and_the_rating_follows(
    demo, page_at, viewport, javascript
):
    ChatSettings.objects.filter(study__slug="chat-demo").update(budget_usd=Decimal("1.00"))
    Provider.objects.filter(configs__condition__study__slug="chat-demo").update(
        price_input_per_million="5", price_output_per_million="20"
    )
    page = page_at(viewport)
    page.set_default_timeout(30_000)
    if not javascript:
        page.context.route("**/static/**/*.js", lambda route: route.abort())
    name = f"chat-closed-{viewport}-{'js' if javascript else 'nojs'}"
    page.goto(demo.kind_links["chat"])
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="Start the conversation about it").click()
    expect(page.locator("h1")).to_have_text("Conversation")
    StudyBudget.objects.filter(study__slug="chat-demo").update(
        spent=Decimal("1.00")
    )  # spent by others meanwhile
    page.get_by_label("Your message").fill("My exam went badly and I feel awful.")
    page.get_by_role("button", name="Send").click()

    expect(page.locator(".chat-note")).to_contain_text("This conversation has come to its end")
    expect(page.get_by_label("Your message")).to_be_hidden()
    problems = axe_violations(page)
    screenshot(page, f"{name}-1-note")
    page.get_by_role("button", name="Finish the conversation and continue").click()
    expect(page.locator("h1")).to_have_text("About the conversation")
    assert problems == []
    conversation = Conversation.objects.get(participant__study__slug="chat-demo")
    assert (conversation.state, conversation.closed_by) == (
        "ended",
        "budget",
    ) and not LiveCall.objects.exists()


@pytest.mark.parametrize("viewport", ["phone", "desktop"])
@pytest.mark.parametrize("javascript", [True, False], ids=["js", "nojs"])
def test_a_model_reply_naming_a_crisis_is_never_shown_and_the_resources_come_instead(
    demo, page_at, viewport, javascript, monkeypatch
):
    from generation.providers import placeholder

    flagged = "I hear how heavy this is. Some people in your place think of suicide; are you safe right now?"
    monkeypatch.setattr(placeholder, "placeholder_reply", lambda body: flagged)
    page = page_at(viewport)
    page.set_default_timeout(30_000)
    if not javascript:
        page.context.route("**/static/**/*.js", lambda route: route.abort())
    name = f"chat-withheld-{viewport}-{'js' if javascript else 'nojs'}"
    # Every text the page ever shows, streamed words included (reported to the test before each navigation).
    seen: list[str] = []
    page.expose_function("reportShown", lambda text: seen.append(text))
    page.add_init_script(
        """new MutationObserver(() => window.reportShown(document.body ? document.body.innerText : ""))
          .observe(document, {subtree: true, childList: true, characterData: true});"""
    )
    page.goto(demo.kind_links["chat"])
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="Start the conversation about it").click()
    page.get_by_label("Your message").fill("My exam went badly and I feel awful.")
    page.get_by_role("button", name="Send").click()

    expect(page.locator("h1")).to_have_text("Before you go on")
    problems = axe_violations(page)
    screenshot(page, f"{name}-1-resources")
    page.get_by_role("button", name="Go back to the conversation").click()
    expect(page.locator("h1")).to_have_text("Conversation")
    expect(page.get_by_text("I'm sorry, that reply could not be shown.")).to_be_visible()
    expect(page.get_by_label("Your message")).to_be_visible()
    assert "suicide" not in page.content() and seen and not any("suicide" in t for t in seen)
    problems += axe_violations(page)
    screenshot(page, f"{name}-2-replaced")
    assert problems == []
    reply = Conversation.objects.get(participant__study__slug="chat-demo").turns.get(index=1)
    assert reply.safety["withheld"] == flagged and reply.safety["terms"] == ["suicid*"]
