"""In-place answers in headless Chromium on a phone (390×844): items replaced without a page load, refresh,
double click, a lost connection and its retry, and the same study walked without JavaScript."""

from datetime import UTC, datetime

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from kinds.rating.models import Rating
from studies.models import Participant
from tests.a11y import axe_violations
from tests.factories import AttentionCheckFactory, rating_study_build
from tests.screenshots import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def study():
    study = rating_study_build(conditions=1, prompts=6, items_per_participant=4)
    AttentionCheckFactory(study=study, after_item=2, expected_value=2)
    return study


def open_items(page, live_server, study, pid):
    page.goto(f"{live_server.url}/s/{study.slug}/?PROLIFIC_PID={pid}&STUDY_ID=S1&SESSION_ID=X1")
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="I have read the instructions, continue").click()
    expect(page.locator("h1")).to_have_text("Item 1 of 5")


def first_answer_lost(page, *, reaches_server: bool) -> list:
    """The page's first answer fails with a reset connection, after reaching the server or not; the later ones
    go through. Returns the list of every attempt's body, as they are made."""
    attempts = []

    def lost_once(route):
        attempts.append(route.request.post_data)
        if len(attempts) > 1:
            route.continue_()
            return
        if reaches_server:
            route.fetch()
        route.abort("connectionreset")

    page.route("**/step/", lost_once)
    return attempts


def choice(page) -> str:
    return "Okay" if "choose Okay" in page.locator("[data-response]").inner_text() else "Good"


def stored(pid: str) -> list[int]:
    return list(
        Rating.objects.filter(assignment__participant__external_id=pid)
        .order_by("assignment__position")
        .values_list("value", flat=True)
    )


TEXTS = ("emotion", "situation", "utterance", "response")


def test_the_first_item_comes_in_place_after_the_instructions_with_its_texts(live_server, page_at, study):
    """The consent page carries the instructions and the first item (the item page's shell and the item):
    no request and no page load until the first answer, the texts filled in by the script, focus, progress
    and the announcement as after an answer. A refresh before the first answer shows the same item again
    (the tab remembers it), and the answer's response time counts its time on screen across the refresh."""
    page = page_at("phone")
    posts = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    page.goto(f"{live_server.url}/s/{study.slug}/?PROLIFIC_PID=PIDFIRST&STUDY_ID=S1&SESSION_ID=X1")
    page.get_by_role("button", name="I agree, start the study").click()
    page.evaluate("window.__kept = true")
    page.get_by_role("button", name="I have read the instructions, continue").click()
    expect(page.locator("h1")).to_have_text("Item 1 of 5")
    assert page.evaluate("window.__kept === true"), "the first item was a page load, not an in-place update"
    shown = {text: page.locator(f"[data-{text}]").inner_text() for text in TEXTS}
    assert all(shown.values()), shown
    expect(page.locator("[data-item-live]")).to_have_text("Item 1 of 5")
    assert page.evaluate("document.activeElement.matches('[data-item-heading]')")
    assert page.title().startswith("Item 1 of 5")
    assert page.evaluate("document.querySelector('[data-item-progress]').value") == 0
    page.screenshot(path="/tmp/inplace-phone-item1.png")
    assert axe_violations(page) == []
    assert posts == []  # consent, instructions and the first item shown without a request
    page.wait_for_timeout(1500)
    page.reload()  # the tab remembers the item it showed ahead: the same item again, at once
    expect(page.locator("h1")).to_have_text("Item 1 of 5")
    assert {text: page.locator(f"[data-{text}]").inner_text() for text in TEXTS} == shown
    page.get_by_role("button", name="Good").tap()
    expect(page.locator("h1")).to_have_text("Item 2 of 5")
    rating = Rating.objects.get(assignment__participant__external_id="PIDFIRST")
    assert rating.response_time_ms >= 1500  # its time on screen counted across the refresh
    assert step_of("PIDFIRST") == Participant.Step.ITEMS


def test_leaving_the_first_item_shown_ahead_sends_the_instructions_so_the_link_shows_it_later(
    live_server, page_at, study
):
    page = page_at("phone")
    link = f"{live_server.url}/s/{study.slug}/?PROLIFIC_PID=PIDLEAVE&STUDY_ID=S1&SESSION_ID=X1"
    page.goto(link)
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="I have read the instructions, continue").click()
    expect(page.locator("h1")).to_have_text("Item 1 of 5")
    shown = page.locator("[data-response]").inner_text()
    assert step_of("PIDLEAVE") == Participant.Step.CONSENT
    page.goto("about:blank")  # another address: the page is hidden and left
    for _ in range(50):
        if step_of("PIDLEAVE") == Participant.Step.ITEMS:
            break
        page.wait_for_timeout(100)
    assert step_of("PIDLEAVE") == Participant.Step.ITEMS
    page.goto(link)  # back later: the study link shows the same item
    expect(page.locator("h1")).to_have_text("Item 1 of 5")
    assert page.locator("[data-response]").inner_text() == shown


def test_items_are_replaced_in_place_with_focus_progress_and_an_announcement(live_server, page_at, study):
    page = page_at("phone")
    open_items(page, live_server, study, "PIDINPLACE")
    page.evaluate("window.__kept = true")  # survives only as long as no new page is loaded
    first = page.locator("[data-response]").inner_text()
    page.get_by_role("button", name="Good").tap()
    expect(page.locator("h1")).to_have_text("Item 2 of 5")
    assert page.evaluate("window.__kept === true"), "the next item was a page load, not an in-place update"
    assert page.locator("[data-response]").inner_text() != first
    expect(page.locator("[data-item-live]")).to_have_text("Item 2 of 5")
    assert page.evaluate("document.activeElement.matches('[data-item-heading]')")
    assert page.evaluate("document.querySelector('[data-item-progress]').value") == 1
    assert page.title().startswith("Item 2 of 5")
    assert page.locator("[aria-pressed]").count() == 0 and page.locator(".scale-button:disabled").count() == 0
    page.screenshot(path="/tmp/inplace-phone-item2.png")
    assert axe_violations(page) == []

    # Refresh mid-way: the step page shows the same item.
    shown = page.locator("[data-response]").inner_text()
    page.reload()
    expect(page.locator("h1")).to_have_text("Item 2 of 5")
    assert page.locator("[data-response]").inner_text() == shown

    # Keyboard shortcuts still answer in place; the attention check looks like any item.
    page.evaluate("window.__kept = true")
    for number in (3, 4, 5):
        key = "2" if choice(page) == "Okay" else "1"
        page.keyboard.press(key)
        expect(page.locator("h1")).to_have_text(f"Item {number} of 5")
    assert page.evaluate("window.__kept === true")
    page.get_by_role("button", name=choice(page)).tap()
    expect(page.locator("[data-completion-code]")).to_have_text("C0MPLETE")
    participant = Participant.objects.get(external_id="PIDINPLACE")
    assert participant.status == Participant.Status.COMPLETED and not participant.flagged_for_exclusion
    assert len(stored("PIDINPLACE")) == 5


def test_a_double_click_sends_one_answer(live_server, page_at, study):
    page = page_at("phone")
    open_items(page, live_server, study, "PIDDOUBLE")
    # Two clicks in the same instant: the second finds the buttons disabled while the first is in flight.
    page.evaluate("() => { const b = document.querySelector('.scale-button'); b.click(); b.click(); }")
    expect(page.locator("h1")).to_have_text("Item 2 of 5")
    page.wait_for_load_state("networkidle")
    assert len(stored("PIDDOUBLE")) == 1


def bad_value(pid: str) -> int:
    scale = Participant.objects.get(external_id=pid).study.scale
    return next(int(option["value"]) for option in scale if option["label"] == "Bad")


def pause_clock(page) -> None:
    """Stops the page's clock (installed before its first page): its timers fire only when a test moves it.
    The pause is set 50 ms ahead of the page's time; on a busy machine the page's clock can pass that before
    Playwright sets it ("Cannot fast-forward to the past"), and the pause is set again from the new time."""
    for attempt in range(5):
        try:
            page.clock.pause_at(datetime.fromtimestamp(page.evaluate("Date.now()") / 1000 + 0.05, tz=UTC))
            return
        except PlaywrightError as error:
            if "fast-forward to the past" not in str(error) or attempt == 4:
                raise


def test_an_answer_given_offline_is_sent_by_itself_once_the_connection_is_back(live_server, page_at, study):
    """Offline, the answer stays selected with an alert; back online, it goes without pressing anything, and
    the server stores it once."""
    page = page_at("phone")
    page.clock.install()  # the re-send's waits pass on the page's clock (below), not in real time
    open_items(page, live_server, study, "PIDOFFLINE")
    posts = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    page.context.set_offline(True)
    page.get_by_role("button", name="Bad").tap()
    retry = page.locator("[data-retry]")
    expect(retry).to_be_visible()
    expect(page.get_by_role("button", name="Bad")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("h1")).to_have_text("Item 1 of 5")
    assert stored("PIDOFFLINE") == []
    page.clock.fast_forward(2500)  # a re-send falls due while offline: it waits for the connection
    assert stored("PIDOFFLINE") == []
    screenshot(page, "inplace-phone-offline", full_page=False)
    assert axe_violations(page) == []
    pause_clock(page)  # (after axe, whose own timers run on the page's clock) no re-send can fall due now
    page.context.set_offline(False)
    # nothing pressed: sent on the `online` event, since the page's clock stands still
    expect(page.locator("h1")).to_have_text("Item 2 of 5")
    expect(retry).to_be_hidden()
    page.clock.fast_forward(5000)  # no second re-send is left waiting: the reply cancelled it
    assert stored("PIDOFFLINE") == [bad_value("PIDOFFLINE")]
    assert Rating.objects.filter(assignment__participant__external_id="PIDOFFLINE").count() == 1
    page.get_by_role("button", name=choice(page)).tap()
    expect(page.locator("h1")).to_have_text("Item 3 of 5")
    assert len(stored("PIDOFFLINE")) == 2


def test_an_answer_whose_reply_was_lost_is_sent_again_by_itself_and_stored_once(live_server, page_at, study):
    """The first attempt reaches the server but its reply never comes back (the connection dropped on the way
    back, the browser still online): the page sends the same answer again after a short wait, and the
    server, which stored the first, stores nothing more and replies with the next item."""
    page = page_at("phone")
    page.clock.install()
    open_items(page, live_server, study, "PIDLOSTREPLY")
    attempts = first_answer_lost(page, reaches_server=True)  # the server answers; the page never sees it
    page.get_by_role("button", name="Bad").tap()
    expect(page.locator("[data-retry]")).to_be_visible()
    assert stored("PIDLOSTREPLY") == [bad_value("PIDLOSTREPLY")]  # stored by the first attempt
    page.clock.fast_forward(2500)  # the re-send's wait (1.5 to 2.5 s), on the page's clock
    expect(page.locator("h1")).to_have_text("Item 2 of 5")  # nothing pressed
    assert len(attempts) == 2 and attempts[0] == attempts[1]
    assert stored("PIDLOSTREPLY") == [bad_value("PIDLOSTREPLY")]


def test_the_button_sends_an_answer_that_was_not_sent_at_once(live_server, page_at, study):
    page = page_at("phone")
    page.clock.install()
    open_items(page, live_server, study, "PIDBUTTON")
    attempts = first_answer_lost(page, reaches_server=False)
    # The page's clock stands still: the automatic re-send (1.5 to 2.5 s after the failure) cannot fall due,
    # however slow the machine, so a second attempt can only be the button's.
    pause_clock(page)
    page.get_by_role("button", name="Bad").tap()
    expect(page.locator("[data-retry]")).to_be_visible()
    assert len(attempts) == 1
    page.get_by_role("button", name="Send my answer again").tap()
    expect(page.locator("h1")).to_have_text("Item 2 of 5")
    assert stored("PIDBUTTON") == [bad_value("PIDBUTTON")]
    assert len(attempts) == 2 and attempts[0] == attempts[1]
    page.clock.fast_forward(5000)  # the re-send the failure scheduled was cancelled by the button's reply
    assert len(attempts) == 2


def test_without_javascript_every_answer_is_a_plain_form_post(live_server, page_at, study):
    page = page_at("phone", javascript=False)
    open_items(page, live_server, study, "PIDNOJS")
    for number in range(1, 6):
        expect(page.locator("h1")).to_have_text(f"Item {number} of 5")
        with page.expect_navigation():
            page.get_by_role("button", name=choice(page)).tap()
        if number == 2:
            page.screenshot(path="/tmp/inplace-phone-nojs-item3.png")
    expect(page.locator("[data-completion-code]")).to_have_text("C0MPLETE")
    assert len(stored("PIDNOJS")) == 5


def step_of(pid: str) -> str:
    return Participant.objects.get(external_id=pid).step


def test_agreeing_and_continuing_send_nothing_and_the_first_answer_posts_all_three(
    live_server, page_at, study
):
    """The consent page carries the instructions and the first item: "I agree" shows the instructions here
    (focus on their heading, the address the step page), "continue" the first item, and the first answer
    posts the consent and the instructions with it: one request for the three steps."""
    page = page_at("phone")
    page.goto(f"{live_server.url}/s/{study.slug}/?PROLIFIC_PID=PIDAHEAD&STUDY_ID=S1&SESSION_ID=X1")
    requests = []
    page.on("request", lambda request: requests.append((request.method, request.url)))
    page.get_by_role("button", name="I agree, start the study").click()
    expect(page.locator("h1")).to_have_text("Instructions")
    assert requests == [] and step_of("PIDAHEAD") == Participant.Step.CONSENT
    assert page.evaluate("document.activeElement.matches('main h1')")
    assert page.url.endswith(f"/s/{study.slug}/step/")
    page.screenshot(path="/tmp/inplace-phone-instructions-ahead.png")
    assert axe_violations(page) == []
    page.get_by_role("button", name="I have read the instructions, continue").click()
    expect(page.locator("h1")).to_have_text("Item 1 of 5")
    assert requests == [] and step_of("PIDAHEAD") == Participant.Step.CONSENT
    page.get_by_role("button", name="Good").tap()
    expect(page.locator("h1")).to_have_text("Item 2 of 5")
    assert [method for method, _ in requests] == ["POST"]
    assert step_of("PIDAHEAD") == Participant.Step.ITEMS
    participant = Participant.objects.get(external_id="PIDAHEAD")
    assert Rating.objects.filter(assignment__participant=participant).count() == 1


@pytest.mark.parametrize("how", ["hidden", "hold", "hidden on the item"])
def test_the_consent_goes_on_its_own_when_the_page_is_hidden_or_the_hold_nears_its_end(
    live_server, page_at, study, settings, how
):
    """A participant who switches apps (on the instructions or on the first item), or reads until near the
    end of the consent's hold, keeps their place: the consent is sent on its own (a beacon as the page is
    hidden; a background post two minutes before the hold would end), and the first answer then takes the
    instructions with it."""
    if how == "hold":
        settings.PARTICIPANT_CONSENT_HOLD_MINUTES = 2  # the script's margin is two minutes: it sends at once
    pid = f"PID{how.upper().replace(' ', '')}"
    page = page_at("phone")
    page.goto(f"{live_server.url}/s/{study.slug}/?PROLIFIC_PID={pid}&STUDY_ID=S1&SESSION_ID=X1")
    page.get_by_role("button", name="I agree, start the study").click()
    expect(page.locator("h1")).to_have_text("Instructions")
    if how == "hidden on the item":
        page.get_by_role("button", name="I have read the instructions, continue").click()
        expect(page.locator("h1")).to_have_text("Item 1 of 5")
    if how.startswith("hidden"):
        page.wait_for_timeout(300)
        assert step_of(pid) == Participant.Step.CONSENT
        page.evaluate(
            "Object.defineProperty(document, 'visibilityState', {value: 'hidden', configurable: true});"
            "document.dispatchEvent(new Event('visibilitychange'))"
        )
    for _ in range(50):
        if step_of(pid) == Participant.Step.INSTRUCTIONS:
            break
        page.wait_for_timeout(100)
    assert step_of(pid) == Participant.Step.INSTRUCTIONS
    if how != "hidden on the item":
        page.get_by_role("button", name="I have read the instructions, continue").click()
        expect(page.locator("h1")).to_have_text("Item 1 of 5")
    page.get_by_role("button", name="Good").tap()
    expect(page.locator("h1")).to_have_text("Item 2 of 5")
    assert step_of(pid) == Participant.Step.ITEMS
