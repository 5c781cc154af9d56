"""Authenticity in Chromium: a keyboard-only person and a DOM-clicking agent end with different scores; the
hidden instruction is in the page's text but not on screen nor in the accessibility tree, and axe stays clean
with it on; a participant without JavaScript completes with no signals and no flag."""

import pytest
from playwright.sync_api import expect

from studies.authenticity import NO_SIGNALS, TRAP_FIELD, trap_word
from studies.models import Participant, ParticipantAuthenticity
from tests.a11y import axe_violations
from tests.factories import rating_study_build

# The pages' clock is moved on to stand for reading (`read`); the server's, which bounds how long a page can have
# been on screen, moves on with it (pages_seconds_apart).
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("pages_seconds_apart"),
]


@pytest.fixture
def study():
    return rating_study_build(conditions=1, prompts=6, items_per_participant=4, trap_hidden_instruction=True)


def entry(live_server, study, pid):
    return f"{live_server.url}/s/{study.slug}/?PROLIFIC_PID={pid}&STUDY_ID=S1&SESSION_ID=X1"


def tab_to(page, name: str) -> None:
    """Presses Tab until the focused element's text contains `name` (a keyboard user's way to a button)."""
    for _ in range(40):
        page.keyboard.press("Tab")
        if name in page.evaluate("document.activeElement ? document.activeElement.textContent : ''"):
            return
    raise AssertionError(f"Tab never reached {name!r}")


def read(page, ms: int) -> None:
    """A person reading for `ms` milliseconds, on the page's clock (`page.clock.install()` before its first page):
    the page's own timers and times (the signals' time on screen) move on at once, as if the time had passed;
    the server's clock is not involved."""
    page.clock.fast_forward(ms)


def consent_by_keyboard(page, live_server, study, pid: str):
    """A keyboard-only person opens the study on a page whose clock is installed, reads and agrees by Tab and
    Enter."""
    page.clock.install()
    page.goto(entry(live_server, study, pid))
    read(page, 600)
    tab_to(page, "I agree")
    page.keyboard.press("Enter")


def authenticity_of(pid: str) -> ParticipantAuthenticity | None:
    return ParticipantAuthenticity.objects.filter(participant__external_id=pid).first()


def test_a_keyboard_only_person_is_not_flagged_and_a_dom_clicking_agent_is(live_server, person_page, study):
    page = person_page()
    consent_by_keyboard(page, live_server, study, "KEYS")
    expect(page.locator("h1")).to_have_text("Instructions")
    read(page, 600)
    tab_to(page, "I have read the instructions")
    page.keyboard.press("Enter")
    for number in range(1, 5):
        expect(page.locator("h1")).to_have_text(f"Item {number} of 4")
        read(page, 1600)
        page.keyboard.press("2")  # the scale's shortcut keys
    expect(page.locator("h1")).to_contain_text("Thank you")
    person = authenticity_of("KEYS")
    assert person is not None and len(person.pages) >= 4, person and person.pages
    assert (person.score, person.flagged, person.reasons) == (100, False, [])
    assert all(page.get("k") and not page.get("pm") for page in person.pages.values())

    agent = person_page()  # the same browser: only how it answers differs
    agent.goto(entry(live_server, study, "AGENT"))
    agent.evaluate("document.querySelector(\"button[value='agree']\").click()")
    expect(agent.locator("h1")).to_have_text("Instructions")
    agent.evaluate("document.querySelector('form[data-step-form] button[type=submit]').click()")
    for number in range(1, 5):
        expect(agent.locator("h1")).to_have_text(f"Item {number} of 4")
        agent.evaluate("document.querySelector('button.scale-button').click()")
    expect(agent.locator("h1")).to_contain_text("Thank you")
    bot = authenticity_of("AGENT")
    assert bot.flagged and bot.score < person.score
    assert any(reason.startswith("scripted clicks") for reason in bot.reasons), bot.reasons
    assert (
        Participant.objects.get(external_id="AGENT").status == Participant.Status.COMPLETED
    )  # never rejected


def test_the_hidden_instruction_is_in_the_text_but_not_on_screen_nor_in_the_accessibility_tree(
    live_server, person_page, study
):
    page = person_page(phone=True)
    page.goto(entry(live_server, study, "A11Y"))
    word = trap_word(study)
    assert word in page.evaluate("document.body.textContent")  # what an agent reading the page gets
    assert word in page.evaluate("document.body.innerText")
    tree = page.locator("body").aria_snapshot()
    assert word not in tree and "Confirmation word" not in tree and "AI agents" not in tree
    assert "I agree, start the study" in tree
    box = page.locator(".trap").bounding_box()  # clipped to one pixel, its overflow hidden: nothing shows
    assert box["width"] <= 1 and box["height"] <= 1
    assert page.evaluate("getComputedStyle(document.querySelector('.trap')).overflow") == "hidden"
    assert page.evaluate(f"document.querySelector(\"input[name='{TRAP_FIELD}']\").tabIndex") == -1
    assert axe_violations(page, impacts=("minor", "moderate", "serious", "critical")) == []
    notice = page.get_by_text("each page also records how it")
    notice.scroll_into_view_if_needed()
    page.screenshot(path="/tmp/authenticity-consent-phone.png")
    page.get_by_role("button", name="I agree, start the study").tap()
    page.get_by_role("button", name="I have read the instructions, continue").tap()
    expect(page.locator("h1")).to_have_text("Item 1 of 4")
    assert word not in page.locator("body").aria_snapshot()
    assert word in page.evaluate("document.body.textContent")
    assert axe_violations(page, impacts=("minor", "moderate", "serious", "critical")) == []
    page.get_by_role("button", name="Good").tap()
    expect(page.locator("h1")).to_have_text("Item 2 of 4")
    row = authenticity_of("A11Y")
    assert not row.flagged and all("trap" not in p for p in row.pages.values())
    assert any(p.get("tp") for p in row.pages.values())  # a phone: touches, no pointer moves


def test_a_participant_without_javascript_completes_with_no_signals_and_no_flag(
    live_server, person_page, study
):
    page = person_page(javascript=False)
    page.goto(entry(live_server, study, "NOJS"))
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="I have read the instructions, continue").click()
    for number in range(1, 5):
        expect(page.locator("h1")).to_have_text(f"Item {number} of 4")
        page.get_by_role("button", name="Okay").click()
    expect(page.locator("h1")).to_contain_text("Thank you")
    assert Participant.objects.get(external_id="NOJS").status == Participant.Status.COMPLETED
    # The browser fetched the consent page's stylesheet: "no signals", never a flag.
    row = authenticity_of("NOJS")
    assert (row.loaded, row.score, row.flagged, row.pages) == (True, None, False, {})
    from studies.authenticity import score_compute

    assert score_compute(client={}, pages={}).reasons == [NO_SIGNALS]


def test_the_consent_notice_and_the_trapped_item_page_on_a_desktop(live_server, person_page, study):
    page = person_page()
    page.goto(entry(live_server, study, "DESK"))
    expect(page.get_by_text("each page also records how it")).to_be_visible()
    page.screenshot(path="/tmp/authenticity-consent-desktop.png", full_page=True)
    assert axe_violations(page, impacts=("minor", "moderate", "serious", "critical")) == []
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="I have read the instructions, continue").click()
    expect(page.locator("h1")).to_have_text("Item 1 of 4")
    page.screenshot(path="/tmp/authenticity-item-desktop.png", full_page=True)
    assert trap_word(study) not in page.locator("main").inner_text().replace(page.evaluate(
        "document.querySelector('.trap').innerText"), "")  # fmt: skip
    # Answered, so that closing the page sends nothing more (the first item shown ahead sends the instructions
    # on leaving, which would reach the server while the test's database is being emptied).
    page.get_by_role("button", name="Okay").click()
    expect(page.locator("h1")).to_have_text("Item 2 of 4")
