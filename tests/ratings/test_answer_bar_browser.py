"""The item page's answer bar on small phones, with the demo's longest conversations: the bar never hides the
end of the reply for good (the page scrolls it clear), and while the reply's end is under the bar a hint says
there is more to read."""

import csv
import re

import pytest
from playwright.sync_api import expect

from studies.demo.texts import DEMO_CORPUS
from studies.models import Prompt, Response
from tests.a11y import axe_violations
from tests.factories import rating_study_build
from tests.screenshots import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ITEMS = 4


def longest_demo_conversations(n: int) -> list[dict]:
    """The demo corpus's `n` longest conversations (situation, utterance and the longest of its replies)."""
    with DEMO_CORPUS.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    conversations = []
    for row in rows:
        reply = max((row[k] for k in row if k.startswith("response_")), key=len)
        conversations.append({"emotion": row["emotion"], "situation": row["situation"],
                              "utterance": row["speaker_uttr"], "reply": reply})  # fmt: skip
    conversations.sort(
        key=lambda c: len(c["situation"]) + len(c["utterance"]) + len(c["reply"]), reverse=True
    )
    return conversations[:n]


@pytest.fixture
def study():
    study = rating_study_build(conditions=1, prompts=ITEMS, items_per_participant=ITEMS)
    for prompt, text in zip(
        Prompt.objects.filter(study=study), longest_demo_conversations(ITEMS), strict=True
    ):
        Prompt.objects.filter(pk=prompt.pk).update(
            situation=text["situation"], speaker_utterance=text["utterance"]
        )
        Response.objects.filter(prompt=prompt).update(text=text["reply"])
    return study


def geometry(page) -> dict:
    return page.evaluate(
        """() => {
          const reply = document.querySelector('[data-response]').getBoundingClientRect();
          const bar = document.querySelector('.answer-bar').getBoundingClientRect();
          const hint = document.querySelector('[data-more-below]');
          return {replyBottom: reply.bottom, barTop: bar.top, viewport: window.innerHeight,
                  hint: !!hint && !hint.hidden && hint.getClientRects().length > 0};
        }"""
    )


@pytest.mark.parametrize("viewport", ["small-phone", "phone", "desktop"])
@pytest.mark.parametrize("javascript", [True, False])
def test_the_answer_bar_never_hides_the_end_of_the_reply(live_server, page_at, study, viewport, javascript):
    page = page_at(viewport)
    if not javascript:  # the site's script blocked, as in a browser without it (the test's own still run)
        page.route("**/static/**/*.js", lambda route: route.abort())
    page.goto(f"{live_server.url}/s/{study.slug}/?PROLIFIC_PID=PIDBAR&STUDY_ID=S1&SESSION_ID=X1")
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="I have read the instructions, continue").click()
    for number in range(1, ITEMS + 1):
        expect(page.locator("h1")).to_have_text(f"Item {number} of {ITEMS}")
        page.evaluate("window.scrollTo(0, 0)")
        page.wait_for_timeout(100)
        top = geometry(page)
        screenshot(
            page, f"answer-bar-{viewport}-{'js' if javascript else 'nojs'}-item{number}", full_page=False
        )
        assert top["hint"] == (top["replyBottom"] > top["barTop"]), (
            top
        )  # exactly when the end is under the bar
        page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
        page.wait_for_timeout(100)
        bottom = geometry(page)
        assert bottom["replyBottom"] <= bottom["barTop"], bottom  # scrolled down, the whole reply is seen
        assert not bottom["hint"], bottom
        if number == 1:
            assert axe_violations(page) == []
        if javascript:
            page.get_by_role("button", name="Good").click()
        else:
            with page.expect_navigation():
                page.get_by_role("button", name="Good").click()


def test_where_css_cannot_tell_that_the_bar_sticks_the_script_marks_it(live_server, page_at, study):
    """Browsers without scroll-state container queries (Safari, Firefox): participant.js marks the bar
    `.is-stuck` while the reply's end is under it, on scrolling and on each item shown in place."""
    page = page_at("small-phone")
    page.add_init_script(
        "const supports = CSS.supports.bind(CSS);"
        "CSS.supports = (...a) => !String(a.join(' ')).includes('scroll-state') && supports(...a);"
    )
    page.goto(f"{live_server.url}/s/{study.slug}/?PROLIFIC_PID=PIDOLD&STUDY_ID=S1&SESSION_ID=X1")
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="I have read the instructions, continue").click()
    bar = page.locator("[data-answer-bar]")
    for number in (1, 2):
        expect(page.locator("h1")).to_have_text(f"Item {number} of {ITEMS}")
        expect(bar).to_have_class(re.compile(r"\bis-stuck\b"))
        page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
        expect(bar).not_to_have_class(re.compile(r"\bis-stuck\b"))
        page.get_by_role("button", name="Good").tap()


def test_the_tag_fits_the_narrowest_phone(live_server, page_at, study, browser):
    context = browser.new_context(viewport={"width": 320, "height": 568}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.goto(f"{live_server.url}/s/{study.slug}/?PROLIFIC_PID=PID320&STUDY_ID=S1&SESSION_ID=X1")
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="I have read the instructions, continue").click()
    expect(page.locator("[data-more-below]")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 320
    box = page.locator("[data-more-below]").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 320
    screenshot(page, "answer-bar-320-item1", full_page=False)
    context.close()
