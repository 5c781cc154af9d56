"""chat-demo's person source walked in headless Chromium: a participant on a phone (390×844) is answered by the
demo's admin typing at the responder console in a second browser (1280×800), waits meanwhile with the stated wait,
gets the design's fallback when nobody answers inside the time limit, then rates the conversation and reads the
debrief. axe-core is clean on every page, the console at both sizes; the transcript export is exactly the turns
typed at both ends, and the conversation export holds the PETS answers. SCREENSHOTS=DIR keeps the screenshots."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from kinds.chat import replies as chat_replies
from kinds.chat.demo import PERSON, PERSON_REPLY_SECONDS
from kinds.chat.models import ChatSettings, Conversation, Turn
from kinds.chat.pets import KEYS
from studies.demo.seed import ADMIN_USERNAME
from tests.a11y import axe_violations
from tests.kinds.chat.walking import demo_live, export_rows, http_errors, pets_give
from tests.screenshots import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
FIRST = "My dog died this morning and I cannot stop crying."
TYPED = "I am so sorry. Losing a dog is losing family. What was their name?"
SECOND = "Her name was Bella. She was fourteen."


@pytest.fixture
def demo(settings, tmp_path, live_server, monkeypatch):
    return demo_live(settings, tmp_path, live_server, monkeypatch, PERSON)


def test_the_admin_answers_a_participant_at_the_console_and_the_fallback_answers_when_nobody_does(
    demo, page_at, monkeypatch
):
    study = demo.kind_studies["chat"]
    assert ChatSettings.objects.get(study=study).person_reply_seconds == PERSON_REPLY_SECONDS == 60
    # The participant is told the time limit once a person is slower than STATED_WAIT_AFTER (5 s on the site):
    # 1 s here, so the test does not sit through the other four.
    monkeypatch.setattr(chat_replies, "STATED_WAIT_AFTER", timedelta(seconds=1))
    problems: list[str] = []

    def check(page, name: str) -> None:
        problems.extend(axe_violations(page))
        screenshot(page, name)

    participant = page_at("phone")
    participant.set_default_timeout(30_000)
    errors = http_errors(participant)
    participant.goto(demo.kind_links["chat"])
    check(participant, "chat-person-1-consent-phone")
    participant.get_by_role("button", name="I agree, start the study").click()
    expect(participant.locator("h1")).to_have_text("Before the conversation")
    participant.get_by_role("button", name="Start the conversation about it").click()
    participant.get_by_label("Your message").fill(FIRST)
    participant.get_by_role("button", name="Send").click()
    expect(participant.locator("#chat-log")).to_contain_text("My dog died")
    # the participant waits, told for how long at most, in words that do not say who writes
    expect(participant.locator("#chat-status")).to_contain_text("It can take up to 1 minute", timeout=15_000)
    check(participant, "chat-person-2-waiting-phone")

    console = page_at("desktop")
    console.set_default_timeout(30_000)
    ((what, link),) = demo.staff_links  # the console's link `make run` prints
    assert what.startswith("Chat responder console") and link.endswith("/analysis/chat-demo/chat/console/")
    console.goto(link)
    console.fill("#id_username", ADMIN_USERNAME)
    console.fill("#id_password", demo.admin_password)
    console.get_by_role("button", name="Sign in").click()
    expect(console.locator("#queue-count")).to_contain_text("1 conversation waiting")
    for size, viewport in SIZES.items():
        console.set_viewport_size(viewport)
        check(console, f"chat-console-queue-{size}")
    console.get_by_role("button", name="Take the next conversation").click()
    expect(console.locator(".console-transcript")).to_contain_text(FIRST)
    for size, viewport in SIZES.items():
        console.set_viewport_size(viewport)
        check(console, f"chat-console-held-{size}")
    console.get_by_label("Your reply").fill(TYPED)
    console.get_by_role("button", name="Send reply").click()
    expect(console.locator(".console-messages")).to_contain_text("Your reply was sent.")
    check(console, "chat-console-sent-desktop")

    log = participant.locator("#chat-log")
    expect(log.locator(".chat-responder .chat-text")).to_have_text([TYPED])
    expect(participant.locator("#chat-status")).to_have_text("")

    # nobody takes the next message: past the time limit (shortened here) the fallback answers it
    ChatSettings.objects.filter(study=study).update(person_reply_seconds=3)
    participant.get_by_label("Your message").fill(SECOND)
    participant.get_by_role("button", name="Send").click()
    replies = log.locator(".chat-responder .chat-text")
    expect(replies).to_have_count(2)
    expect(participant.locator("#chat-status")).to_have_text("")  # the fallback's reply is complete
    check(participant, "chat-person-3-fallback-phone")
    fallback_text = replies.nth(1).inner_text()
    expect(console.locator("#queue-count")).to_contain_text("0 conversations waiting")  # it left the queue

    participant.get_by_role("button", name="Finish the conversation and continue").click()
    expect(participant.locator("h1")).to_have_text("About the conversation")
    given = pets_give(participant)
    participant.get_by_label("Okay").check()
    check(participant, "chat-person-4-rate-phone")
    participant.get_by_role("button", name="Continue").click()
    expect(participant.locator("h1")).to_have_text("About this study")
    check(participant, "chat-person-5-debrief-phone")
    participant.get_by_role("button", name="I have read this, finish").click()
    expect(participant.get_by_text("CHAT-COMPLETE")).to_be_visible()
    check(participant, "chat-person-6-done-phone")
    assert problems == [] and errors == []

    conversation = Conversation.objects.get(participant__study=study)
    assert conversation.condition.name == PERSON and conversation.fallback_used
    assert conversation.turns.get(index=1).responder.get_username() == ADMIN_USERNAME
    transcript = export_rows(study, "transcript")
    assert [(r["role"], r["text"], r["answered_by"], r["responder"], r["status"]) for r in transcript] == [
        ("participant", FIRST, "", "", Turn.Status.COMPLETE),
        ("responder", TYPED, PERSON, ADMIN_USERNAME, Turn.Status.COMPLETE),
        ("participant", SECOND, "", "", Turn.Status.COMPLETE),
        ("responder", fallback_text, "fallback", "", Turn.Status.COMPLETE),
    ]
    (row,) = export_rows(study, "ratings")
    assert (row["source"], row["source_kind"], row["fallback_used"]) == (PERSON, "human", "true")
    assert {key: int(row[f"pets_{key}"]) for key in KEYS} == given and row["scale_label"] == "Okay"
