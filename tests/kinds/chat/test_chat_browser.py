"""chat-demo walked in headless Chromium with its test model as the source: phone 390×844 and desktop 1280×800,
JavaScript on (the reply streams in place, word by word) and off (each message a plain post, the reply on the next
page); axe-core clean on every page, the debrief included; the transcript export's rows are exactly the turns typed
and the replies shown, and the conversation export holds every PETS answer given. (The person source, answered at
the responder console: test_chat_console_browser.py.) Screenshots of every page when SCREENSHOTS names a
directory."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from kinds.chat.demo import MODEL_SOURCE
from kinds.chat.models import ChatRating, Conversation
from kinds.chat.pets import KEYS
from studies.models import Participant
from tests.a11y import axe_violations
from tests.kinds.chat.walking import demo_live, export_rows, http_errors, pets_give
from tests.screenshots import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
MESSAGES = ["My dog died last week and the house is so quiet.", "I keep looking for him by the door."]


@pytest.fixture
def demo(settings, tmp_path, live_server, monkeypatch):
    return demo_live(settings, tmp_path, live_server, monkeypatch, MODEL_SOURCE)


def _check(page, name: str, problems: list[str]) -> None:
    problems += axe_violations(page)
    screenshot(page, name)


@pytest.mark.parametrize("viewport", ["phone", "desktop"])
@pytest.mark.parametrize("javascript", [True, False], ids=["js", "nojs"])
def test_chat_demo_is_walked_into_the_transcript_and_the_rating(demo, page_at, viewport, javascript):
    link = demo.kind_links["chat"]
    assert re.match(r"^http://.*/s/chat-demo/\?PROLIFIC_PID=", link)
    page = page_at(viewport)
    if not javascript:  # the site's own scripts blocked, as in a browser without them; axe still runs
        page.context.route("**/static/**/*.js", lambda route: route.abort())
    name = f"chat-{viewport}-{'js' if javascript else 'nojs'}"
    problems: list[str] = []
    errors = http_errors(page)
    page.goto(link)
    _check(page, f"{name}-1-consent", problems)
    page.get_by_role("button", name="I agree, start the study").click()
    expect(page.locator("h1")).to_have_text("Before the conversation")
    _check(page, f"{name}-2-opening", problems)
    page.get_by_role("button", name="Start the conversation about it").click()
    expect(page.locator("h1")).to_have_text("Conversation")
    shown = []  # the turns as the participant typed and read them
    for n, message in enumerate(MESSAGES, start=1):
        page.get_by_label("Your message").fill(message)
        page.get_by_role("button", name="Send").click()
        replies = page.locator(".chat-responder .chat-text")
        expect(replies).to_have_count(n)
        expect(page.locator("#chat-status")).to_have_text("")  # the reply is complete
        shown += [("participant", message), ("responder", replies.nth(n - 1).inner_text())]
        _check(page, f"{name}-3-talk-{n}", problems)
    page.get_by_role("button", name="Finish the conversation and continue").click()
    expect(page.locator("h1")).to_have_text("About the conversation")
    slider = page.locator("input[type=range]").first
    slider.focus()
    page.keyboard.press("End")  # a slider moves from the keyboard…
    expect(slider).to_have_value("100")
    given = pets_give(page)  # … and every one is given its value
    page.get_by_label("Good").check()
    page.get_by_label(re.compile("Anything you want to add")).fill("It felt kind.")
    _check(page, f"{name}-4-rate", problems)
    page.get_by_role("button", name="Continue").click()
    expect(page.locator("h1")).to_have_text("About this study")
    _check(page, f"{name}-5-debrief", problems)
    page.get_by_role("button", name="I have read this, finish").click()
    expect(page.get_by_text("CHAT-COMPLETE")).to_be_visible()
    _check(page, f"{name}-6-done", problems)
    assert problems == [] and errors == []

    participant = Participant.objects.get(study__slug="chat-demo", external_id__startswith="demo-")
    assert participant.status == "completed"
    conversation = Conversation.objects.get(participant=participant)
    assert conversation.condition.name == MODEL_SOURCE
    replies = list(conversation.turns.filter(role="responder"))
    assert len(replies) == 2 and all(t.status == "complete" and t.text and t.shown_at for t in replies)
    study = demo.kind_studies["chat"]
    transcript = export_rows(study, "transcript")
    assert [(row["role"], row["text"]) for row in transcript] == shown
    assert {row["participant"] for row in transcript} == {participant.external_id}
    (row,) = export_rows(study, "ratings")
    assert row["participant"] == participant.external_id and row["source"] == MODEL_SOURCE
    assert {key: int(row[f"pets_{key}"]) for key in KEYS} == given
    assert row["pets_order"].split() == list(given)  # the order shown
    assert (row["scale_label"], row["free_text"]) == ("Good", "It felt kind.")
    rating = ChatRating.objects.get(conversation=conversation)
    assert rating.pets == given and rating.scale_value == 2


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "nojs"])
def test_a_reply_pending_when_the_page_is_shown_is_produced_once_and_shown(demo, page_at, javascript):
    """A refresh or a lost connection mid-reply: the page shown with the reply pending asks for it (at once with
    JavaScript; with a "Show the reply" button without), and it is stored once."""
    from kinds.chat.turns import participant_turn_store

    page = page_at("phone")
    if not javascript:
        page.context.route("**/static/**/*.js", lambda route: route.abort())
    page.goto(demo.kind_links["chat"])
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="Start the conversation about it").click()
    expect(page.locator("h1")).to_have_text("Conversation")
    conversation = Conversation.objects.get(participant__study__slug="chat-demo")
    participant_turn_store(
        conversation, "I lost my job today."
    )  # the message reached the server; the reply did not
    page.reload()
    if not javascript:
        expect(page.locator("#chat-status")).to_have_text("Your reply is on its way.")
        screenshot(page, "chat-phone-nojs-pending")
        page.get_by_role("button", name="Show the reply").click()
    expect(page.locator(".chat-responder .chat-text")).to_have_count(1)
    expect(page.locator(".chat-responder .chat-text")).not_to_have_text("")
    assert axe_violations(page) == []
    replies = conversation.turns.filter(role="responder")
    assert replies.count() == 1 and replies.get().status == "complete"
