"""The participant flow in headless Chromium: completion, resume after reload, a phone, keyboard shortcuts."""

import re

import pytest
from playwright.sync_api import expect

from kinds.rating.models import Rating, RatingSettings
from studies.models import Participant, Study
from tests.factories import AttentionCheckFactory, rating_study_build

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WORKED_EXAMPLES = [
    {
        "emotion": "proud",
        "situation": "I finally finished my first marathon after a year of training.",
        "speaker_utterance": "I did it, I ran the whole thing!",
        "response": "That is amazing, a whole year of work paying off. How do you feel now?",
        "rating": 3,
        "explanation": "The response recognises the effort and invites the speaker to share more.",
    }
]


@pytest.fixture
def study():
    study = rating_study_build(
        conditions=2,
        prompts=6,
        items_per_participant=3,
        worked_examples=WORKED_EXAMPLES,
        completion_redirect_url="https://app.prolific.com/submissions/complete?cc={code}",
    )
    Study.objects.filter(pk=study.pk).update(
        consent_text="You are invited to rate short conversations. It takes about five minutes."
    )
    return study


def open_study(page, live_server, study, pid):
    page.goto(f"{live_server.url}/s/{study.slug}/?PROLIFIC_PID={pid}&STUDY_ID=S1&SESSION_ID=X1")
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="I have read the instructions, continue").click()
    expect(page.locator("[data-item-heading]")).to_have_text(re.compile(r"^Item 1 of "))


def progress(page) -> str:
    return page.locator(".progress-text").inner_text()


def test_a_participant_completes_the_study_and_sees_the_completion_code(live_server, page, study):
    open_study(page, live_server, study, "PIDBROWSER1")
    for number in (1, 2, 3):
        expect(page.locator(".progress-text")).to_have_text(f"Item {number} of 3")
        page.get_by_role("button", name="Good").click()
    code = page.locator("[data-completion-code]")
    assert code.inner_text() == "C0MPLETE"
    link = page.get_by_role("link", name="Return to Prolific to confirm")
    assert link.get_attribute("href") == "https://app.prolific.com/submissions/complete?cc=C0MPLETE"
    assert Participant.objects.get().status == Participant.Status.COMPLETED


def test_a_participant_who_reloads_mid_study_resumes_on_the_same_item(live_server, page, study):
    open_study(page, live_server, study, "PIDBROWSER2")
    page.get_by_role("button", name="Okay").click()
    expect(page.locator(".progress-text")).to_have_text("Item 2 of 3")
    shown = page.locator("[data-response]").inner_text()
    page.reload()
    assert progress(page) == "Item 2 of 3"
    assert page.locator("[data-response]").inner_text() == shown
    page.go_back()  # the back button re-asks the server (no-store): still the current item
    expect(page.locator("[data-back-note]")).to_be_visible()  # Back reloads the step page (participant.js)
    expect(page.locator(".progress-text")).to_have_text("Item 2 of 3")
    page.goto(f"{live_server.url}/s/{study.slug}/?PROLIFIC_PID=PIDBROWSER2&STUDY_ID=S1&SESSION_ID=X1")
    assert progress(page) == "Item 2 of 3"
    assert page.locator("[data-response]").inner_text() == shown
    assert Rating.objects.count() == 1


def assert_fits_the_phone(page):
    fits = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert fits, page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    for button in page.locator("button:visible, a.button:visible").all():
        box = button.bounding_box()
        assert box and box["height"] >= 44, (button.inner_text(), box)


def test_the_flow_works_on_a_phone(live_server, phone_page, study):
    RatingSettings.objects.create(study=study, ask_teq=True)
    AttentionCheckFactory(study=study, after_item=1, expected_value=2)
    page = phone_page
    page.goto(f"{live_server.url}/s/{study.slug}/?PROLIFIC_PID=PIDPHONE&STUDY_ID=S1&SESSION_ID=X1")
    assert_fits_the_phone(page)
    page.get_by_role("button", name="I agree, start the study").click()
    expect(page.get_by_role("heading", name="Instructions", exact=True)).to_be_focused()  # shown in place
    assert_fits_the_phone(page)
    page.get_by_role("button", name="I have read the instructions, continue").click()
    expect(page.get_by_role("heading", name="About you")).to_be_focused()
    assert_fits_the_phone(page)
    for number in range(1, 17):  # the TEQ, tapped like a phone user would
        page.locator(f"#teq-{number} label.likert-option").nth(number % 5).tap()
    page.get_by_role("button", name="Continue").tap()
    expect(page.locator(".progress-text")).to_have_text("Item 1 of 4")
    assert_fits_the_phone(page)
    page.screenshot(path="/tmp/item-phone.png", full_page=True)
    page.set_viewport_size({"width": 320, "height": 640})  # the narrowest phones still in use
    assert_fits_the_phone(page)
    page.set_viewport_size({"width": 390, "height": 844})
    for number in range(1, 5):
        expect(page.locator(".progress-text")).to_have_text(f"Item {number} of 4")
        attention = "choose Okay" in page.locator("[data-response]").inner_text()
        page.get_by_role("button", name="Okay" if attention else "Good").tap()
    assert page.locator("[data-completion-code]").inner_text() == "C0MPLETE"
    assert_fits_the_phone(page)
    participant = Participant.objects.get()
    assert participant.teq_score is not None and not participant.flagged_for_exclusion


def test_keyboard_shortcuts_answer_the_item(live_server, page, study):
    open_study(page, live_server, study, "PIDKEYS")
    assert page.locator(".shortcut-hint").is_visible()
    page.keyboard.press("1")  # Good, the first option
    expect(page.locator(".progress-text")).to_have_text("Item 2 of 3")
    page.keyboard.press("3")  # Bad
    expect(page.locator(".progress-text")).to_have_text("Item 3 of 3")
    values = list(Rating.objects.order_by("assignment__position").values_list("value", flat=True))
    assert values == [3, 1]
    button = page.get_by_role("button", name="Okay")
    button.focus()
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"


def test_a_participant_completes_the_seeded_demo_from_its_printed_link(live_server, page, settings, tmp_path):
    import importlib

    from django.apps import apps

    from studies.demo.seed import demo_seed

    # Transactional tests empty every table afterwards, the emotions seeded by a data migration included.
    importlib.import_module("studies.migrations.0002_seed_emotions").seed_emotions(apps, None)
    settings.VAR_DIR = tmp_path  # the demo's admin password file
    link = demo_seed(base_url=live_server.url).kind_links["rating"]
    page.goto(link)
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="I have read the instructions, continue").click()
    for number in range(1, 17):
        page.locator(f"#teq-{number} label.likert-option").nth(3).click()
    page.get_by_role("button", name="Continue").click()
    for number in range(
        1, 14
    ):  # 10 responses, the attention check and the consistency pairs' second showings
        expect(page.locator(".progress-text")).to_have_text(f"Item {number} of 13")
        attention = "please choose Okay" in page.locator("[data-response]").inner_text()
        page.get_by_role("button", name="Okay" if attention else "Good").click()
    expect(page.locator("[data-completion-code]")).to_have_text("DEMO-COMPLETE")
