"""Both study kinds' participant pages, as the seeded demo studies show them, in headless Chromium on two
phones and a desktop: the whole rating scale in view on every item page, Likert labels that never break
inside a word, axe-core with no serious or critical violation, the flow without JavaScript, and the small
helps (copy the code, the note after Back, the error summary)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from kinds.questionnaire.demo import QUESTIONNAIRE_SLUG
from kinds.rating.demo import DEMO_SLUG
from kinds.rating.models import Rating
from studies.demo.seed import demo_seed
from studies.models import Participant, QuestionnaireRun, QuestionnaireSettings
from tests.a11y import axe_violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHECK = re.compile(r"choose “([^”]+)” in this row")

# Each label's words, measured with a Range per word: a word broken across lines has two client rects, and a
# word wider than its answer's box sticks out of it.
LABELS_BROKEN_INSIDE_A_WORD = """() => {
  const problems = [];
  for (const label of document.querySelectorAll('.likert-label')) {
    const text = label.firstChild, box = label.closest('label').getBoundingClientRect();
    for (const match of text.textContent.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(text, match.index);
      range.setEnd(text, match.index + match[0].length);
      const lines = [...range.getClientRects()].filter(r => r.width > 0).length;
      const word = range.getBoundingClientRect();
      if (lines !== 1) problems.push(`"${match[0]}" of "${text.textContent}" on ${lines} lines`);
      if (word.left < box.left - 0.5 || word.right > box.right + 0.5) problems.push(`"${match[0]}" overflows`);
    }
  }
  return problems;
}"""

# Each scale button entirely inside the viewport, at the top of the page, and not covered by anything.
SCALE_OUT_OF_VIEW = """() => {
  window.scrollTo(0, 0);
  return [...document.querySelectorAll('.scale-button')].flatMap(button => {
    const r = button.getBoundingClientRect();
    const inside = r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth;
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return inside && button.contains(hit) ? [] : [`${button.innerText.trim()} at ${Math.round(r.top)}-${Math.round(r.bottom)} of ${innerHeight}`];
  });
}"""


@pytest.fixture
def demo(settings, tmp_path, live_server):
    settings.VAR_DIR = tmp_path
    return demo_seed(base_url=live_server.url)


def current_step(page) -> str:
    """The step the page shows (its form's hidden `step`), or "done" on the completion page."""
    steps = page.locator("input[name=step]")
    if steps.count():
        return steps.first.get_attribute("value")
    assert "Thank you" in page.title(), page.title()
    return "done"


def answer(page, step: str) -> None:
    """Answers the page like a careful participant (attention checks passed), by tapping or clicking."""
    if step == "consent":
        page.get_by_role("button", name="I agree, start the study").click()
    elif step == "instructions":
        page.get_by_role("button", name="I have read the instructions, continue").click()
    elif step in {"teq", "q_default", "q_evoked"}:
        expect(page.locator("fieldset.likert-item").first).to_be_visible()  # shown in place, if it was
        for fieldset in page.locator("fieldset.likert-item").all():
            asked = CHECK.search(fieldset.locator("legend").inner_text())
            option = fieldset.locator("label.likert-option")
            (fieldset.get_by_label(asked.group(1), exact=True) if asked else option.nth(2)).click()
        page.get_by_role("button", name="Continue").click()
    elif step == "items":
        attention = "choose Okay" in page.locator("[data-response]").inner_text()
        page.get_by_role("button", name="Okay" if attention else "Good").click()
    elif step in {"demographics"}:
        page.get_by_role("button", name="Continue").click()
    elif step == "q_situation":
        page.get_by_role("button", name="I have imagined it, continue").click()
    else:
        raise AssertionError(f"no answer for step {step!r}")


def walk(page, url: str, check=lambda page, step: None) -> list[str]:
    """Goes through a study from its link to the completion page, calling `check` on every page; returns the
    steps seen, one per page."""
    page.goto(url)
    seen = []
    for _ in range(60):
        step = current_step(page)
        seen.append(step)
        check(page, step)
        if step == "done":
            return seen
        before = page.content()
        heading = page.locator("h1").inner_text()
        in_place = page.locator("form[data-step-form], form[data-in-place]").count() > 0
        answer(page, step)
        if in_place:  # answered in place (participant.js) or by a page load: either way a new heading
            expect(page.locator("h1")).not_to_have_text(heading)
        page.wait_for_load_state("load")
        assert page.content() != before, f"the page did not change after answering {step}"
    raise AssertionError(f"the study did not end: {seen}")


# What every page of both demo studies is checked for, walking each study once per viewport: the whole scale in
# view on each item page (the phones), Likert labels never broken inside a word (all three), axe-core (a phone
# and the desktop, each Likert page also with its error summary, and the stop-and-return pages), the attention
# check's emotion (a phone) and the situation in view on the second questionnaire page (the small phone).
WALKED_FOR = {
    "phone": {"scale", "labels", "axe", "attention"},
    "small-phone": {"scale", "labels", "situation"},
    "desktop": {"labels", "axe"},
}


@pytest.mark.parametrize("viewport", list(WALKED_FOR))
def test_every_participant_page_of_both_kinds_fits_the_screen_and_passes_axe(demo, page_at, viewport):
    checks = WALKED_FOR[viewport]
    QuestionnaireSettings.objects.filter(study__slug=QUESTIONNAIRE_SLUG).update(ask_demographics=True)
    page = page_at(viewport)
    item_pages, measured, violations, checked, attention = [], [], [], [], {}

    def check(page, step):
        assert page.locator("h1").count() == 1, f"{step}: one h1"
        assert "{#" not in page.content() and "{%" not in page.content(), f"{step}: template syntax shown"
        if "scale" in checks and step == "items":
            assert page.evaluate(SCALE_OUT_OF_VIEW) == [], page.locator("h1").inner_text()
            item_pages.append(page.locator("h1").inner_text())
        if "labels" in checks and step in {"teq", "q_default", "q_evoked"}:
            assert page.locator(".likert-label").count() >= 16 * 5
            assert page.evaluate(LABELS_BROKEN_INSIDE_A_WORD) == []
            assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
            measured.append(step)
        if "attention" in checks and step == "items":
            attention[page.locator("[data-response]").inner_text()] = page.locator(".emotion").inner_text()
        if "situation" in checks and step == "q_evoked":
            situation_stays_in_view(page)
        if "axe" in checks:
            violations.extend(axe_violations(page))
            checked.append(step)
            if step in {"teq", "q_default"}:  # the same page with its error summary
                submit_incomplete(page)
                assert page.evaluate("document.activeElement.id") == "errors"
                violations.extend(axe_violations(page))
                checked.append(f"{step} with errors")

    rating_steps = walk(page, demo.kind_links["rating"], check)
    questionnaire_steps = walk(page, demo.kind_links["questionnaire"], check)
    assert rating_steps.count("items") == 13 and "q_evoked" in questionnaire_steps
    if "scale" in checks:
        # 10 responses, the attention check and the consistency pairs' 2 second showings (the demo's traps)
        assert item_pages == [f"Item {n} of 13" for n in range(1, 14)]
    assert measured == ["teq", "q_default", "q_evoked"]
    if "attention" in checks:
        attention_check_shows_a_real_emotion(attention, demo.kind_studies["rating"])
    if "axe" in checks:
        # Stop and return: the confirmation and the page after it.
        page.goto(demo.kind_links["rating"].replace("PROLIFIC_PID=demo-", "PROLIFIC_PID=returning-"))
        answer(page, "consent")
        page.get_by_role("link", name="Stop and return this study").click()
        violations.extend(axe_violations(page))
        page.get_by_role("button", name=re.compile("return", re.I)).click()
        violations.extend(axe_violations(page))
        assert violations == []
        assert (
            checked.count("items") == 13
            and "teq with errors" in checked
            and "q_default with errors" in checked
        )
        assert {"consent", "instructions", "demographics", "q_situation", "q_evoked", "done"} <= set(checked)


def attention_check_shows_a_real_emotion(shown: dict[str, str], study) -> None:
    """`shown`: each item page's response and the emotion shown with it."""
    check_emotion = next(emotion for response, emotion in shown.items() if "choose Okay" in response)
    emotions = set(study.prompts.values_list("emotion__name", flat=True))
    assert check_emotion.lower() in {e.lower() for e in emotions} and "attention" not in check_emotion.lower()


def situation_stays_in_view(page) -> None:
    """On the second questionnaire page of a 360×640 phone, scrolled to its last statement."""
    reminder = page.locator("[data-situation-reminder]")
    page.locator("fieldset.likert-item").last.scroll_into_view_if_needed()
    box = reminder.bounding_box()
    assert box["y"] >= -0.5 and box["y"] + box["height"] <= 640
    assert page.evaluate("scrollY") > 1000


def test_both_kinds_complete_without_javascript(demo, page_at):
    page = page_at("phone", javascript=False)
    rating_steps = walk(page, demo.kind_links["rating"])
    assert rating_steps[:3] == ["consent", "instructions", "teq"] and rating_steps.count("items") == 13
    assert page.locator("[data-completion-code]").inner_text() == "DEMO-COMPLETE"
    assert page.locator("[data-copy-row]").is_hidden()  # the copy button needs JavaScript: not offered
    questionnaire_steps = walk(page, demo.kind_links["questionnaire"])
    assert questionnaire_steps == ["consent", "q_default", "q_situation", "q_evoked", "done"]
    assert page.locator("[data-completion-code]").inner_text() == "FEEL-COMPLETE"
    rater = Participant.objects.get(study__slug=DEMO_SLUG)
    respondent = Participant.objects.get(study__slug=QUESTIONNAIRE_SLUG)
    assert rater.status == respondent.status == Participant.Status.COMPLETED
    assert not rater.flagged_for_exclusion and not respondent.flagged_for_exclusion
    assert (
        Rating.objects.filter(assignment__participant=rater).count() == 13
    )  # 10 responses, the attention check, 2 consistency pairs
    assert QuestionnaireRun.objects.filter(participant=respondent).count() == 2


def submit_incomplete(page) -> None:
    """Sends the page's Likert form with only its first statement answered (the browser's own check of
    `required` is what a participant without JavaScript would meet; the server's is tested here)."""
    expect(page.locator("fieldset.likert-item").first).to_be_visible()  # the page shown in place, if it was
    page.evaluate("document.querySelectorAll('input[required]').forEach(i => i.removeAttribute('required'))")
    page.locator("fieldset.likert-item").first.locator("label.likert-option").nth(1).click()
    page.get_by_role("button", name="Continue").click()
    expect(page.locator("[data-error-summary]")).to_be_visible()  # in place (participant.js) or a new page


def test_the_error_summary_takes_the_focus_and_its_links_reach_the_missing_statements(demo, page_at):
    page = page_at("phone")
    page.goto(demo.kind_links["rating"])
    answer(page, "consent")
    answer(page, "instructions")
    submit_incomplete(page)
    summary = page.locator("#errors")
    expect(summary).to_be_focused()
    links = summary.get_by_role("link")
    expect(links).to_have_count(15)
    links.nth(0).click()
    expect(page.locator("#teq_2-1")).to_be_focused()
    assert page.evaluate("document.getElementById('teq-2').getBoundingClientRect().top") >= -1


def test_back_after_an_answer_says_it_was_saved_and_the_code_can_be_copied(demo, page_at):
    page = page_at("desktop")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(demo.kind_links["rating"])
    for step in ("consent", "instructions", "teq"):
        answer(page, step)
    expect(page.locator("h1")).to_have_text("Item 1 of 13")
    assert page.locator("[data-back-note]").count() == 0
    answer(page, "items")
    expect(page.locator("h1")).to_have_text("Item 2 of 13")
    assert page.locator("[data-back-note]").is_hidden()
    page.go_back()
    expect(page.locator("h1")).to_have_text("Item 2 of 13")  # answers cannot be changed: still the next item
    expect(page.locator("[data-back-note]")).to_be_visible()
    expect(page.locator("[data-back-note]")).to_contain_text("Your answer to the previous item was saved")
    walk(page, page.url)
    page.get_by_role("button", name="Copy the code").click()
    expect(page.locator("[data-copy-status]")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == "DEMO-COMPLETE"
