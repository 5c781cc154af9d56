"""A researcher's pairwise study in headless Chromium, from "New study" to its pre-registration and its analysis
page, at 1280×800 and 390×844, axe-clean: the setup, the worked examples, the welcome page and the
pre-registration speak pairwise (Bradley–Terry, the known-answer pairs counted, the four choices; no scale, no
ratings per response, no chi-square), and the analysis page says its result, that the data are too few and
what it would take, and who was excluded and why. With SCREENSHOTS=DIR each page is left there at both sizes.
The study's material and votes are written directly (the rating path's browser test drives import and
generation through the admin already)."""

from __future__ import annotations

import random
import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from kinds.pairwise.models import PairwiseSettings
from studies.design import design_freeze
from studies.models import PairAttentionCheck, Study
from tests.a11y import axe_violations
from tests.analysis.test_pairwise_page import rater
from tests.browser_login import sign_in
from tests.factories import ConditionFactory, PromptFactory, ResponseFactory
from tests.screenshots import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "a-long-test-password"
SLUG = "pairs-replication"
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


def _material(study: Study) -> None:
    """Three conditions replying to twelve prompts, one known-answer pair, instructions; live."""
    arms = [ConditionFactory(study=study, name=f"arm{i}", position=i, is_baseline=i == 0) for i in range(3)]
    for _ in range(12):
        prompt = PromptFactory(study=study)
        for arm in arms:
            ResponseFactory(prompt=prompt, condition=arm)
    PairwiseSettings.objects.get_or_create(study=study)
    PairAttentionCheck.objects.create(
        study=study, emotion_label="anxious", situation="I have a job interview tomorrow.",
        speaker_utterance="I cannot sleep.", good_reply="That sounds stressful; it matters to you.",
        poor_reply="Whatever.", after_item=3,
    )  # fmt: skip
    Study.objects.filter(pk=study.pk).update(
        items_per_participant=6, quota_per_condition=100, instructions_text="Pick the kinder reply."
    )


def test_a_pairwise_study_from_new_study_to_its_preregistration_and_analysis(live_server, browser):
    get_user_model().objects.create_superuser(username="researcher", email="", password=PASSWORD)
    context = browser.new_context(viewport=SIZES["desktop"])
    page = context.new_page()
    page.set_default_timeout(30_000)
    violations: list[str] = []
    wide: list[str] = []

    def look(name: str) -> None:
        for size, viewport in SIZES.items():
            page.set_viewport_size(viewport)
            violations.extend(axe_violations(page))
            screenshot(page, f"pairwise-{name}-{size}")
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > viewport["width"]:
                wide.append(f"{name}: {width} px wide at {viewport['width']} px")
        page.set_viewport_size(SIZES["desktop"])

    def text() -> str:
        return re.sub(r"\s+", " ", page.locator("body").inner_text())

    sign_in(page, live_server.url, "researcher", PASSWORD)
    page.get_by_role("link", name="New study").click()
    page.get_by_label("Title").fill("Pairs replication")
    page.get_by_label("Kind of study").select_option("pairwise")
    page.get_by_label("Recruiting platform").select_option("none")
    page.get_by_role("button", name="Create the draft").click()
    expect(page.locator(".setup-steps")).to_contain_text("Corpus: prompts and replies")
    study = Study.objects.get(slug=SLUG)
    _material(study)

    # The texts step and the study's page: the worked examples show two replies and the choice.
    page.goto(f"{live_server.url}/admin/studies/study/{study.pk}/setup/texts/")
    assert "the worked examples (two replies and the better one) and the known-answer pairs" in text()
    look("setup-texts")
    page.goto(f"{live_server.url}/admin/studies/study/{study.pk}/change/")
    body = text()
    assert "Reply A" in body and "Reply B" in body and "The more empathetic reply" in body
    assert "Its rating" not in body and "Scale question" not in body
    page.locator("textarea[name=worked_examples_1]").first.fill("I lost my job today.")
    page.locator("textarea[name=worked_examples_2]").first.fill("I do not know what to do.")
    page.locator("textarea[name=worked_examples_3]").first.fill("That is a shock; how are you holding up?")
    page.locator("textarea[name=worked_examples_4]").first.fill("Get another one.")
    page.locator("select[name=worked_examples_5]").first.select_option(label="A is more empathetic")
    page.get_by_role("button", name="Save and continue editing").first.click()
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    assert Study.objects.get(pk=study.pk).worked_examples[0]["choice"] == "A"
    look("study-change")

    # The welcome page and the instructions, as a participant sees them.
    Study.objects.filter(pk=study.pk).update(state=Study.State.LIVE)
    study = Study.objects.get(pk=study.pk)
    design_freeze(study, reason="launch")
    page.goto(f"{live_server.url}/s/{SLUG}/")
    assert "each with two replies, and say which reply is more empathetic" in text()
    look("welcome")

    # The pre-registration.
    page.goto(f"{live_server.url}/admin/studies/study/{study.pk}/prereg/")
    body = text()
    assert "Primary test: Bradley–Terry" in body
    assert "Known-answer pairs (the attention checks): 1" in body
    assert (
        "A is more empathetic / B is more empathetic / about the same" in body
        and "both are inadequate" in body
    )
    for rating_word in ("Scale:", "Good = 3", "ratings per response", "chi-square", "χ²"):
        assert rating_word not in body
    look("prereg")

    # The instructions, as a participant sees them (a staff preview, never counted): the worked example.
    page.goto(f"{live_server.url}/s/{SLUG}/?preview=1")
    page.get_by_role("button", name="I agree, start the study").click()
    expect(page.get_by_role("heading", name="Worked examples")).to_be_visible()
    body = text().lower()  # the labels are shown in capitals
    assert (
        "reply a" in body and "reply b" in body and "the more empathetic reply: a is more empathetic" in body
    )
    assert "rating:" not in body
    look("instructions")

    # Votes: six careful raters and two who fail the known-answer pair; then the analysis page.
    rng = random.Random(5)
    for i in range(6):
        rater(study, f"ok{i}", careless=False, rng=rng)
    for i in range(2):
        rater(study, f"careless{i}", careless=True, rng=rng)
    page.goto(f"{live_server.url}/analysis/{SLUG}/pairwise/")
    body = text()
    assert re.search(r"votes from 6 raters on \d+ prompts compare 3 conditions against arm0", body)
    assert "Too little data to say anything yet" in body and "it would take" in body
    assert "2 of 8 raters are excluded" in body and "2 failed the known-answer pairs" in body
    assert (
        "Strengths of the conditions" in body and "bt_scores.csv" not in page.locator("h2").all_inner_texts()
    )
    look("analysis")
    page.get_by_label("No exclusions").check()
    page.get_by_role("button", name="Update").click()
    expect(page.locator("#exclusions-line")).to_contain_text("Exclusions are off: the votes of all 8 raters")
    look("analysis-no-exclusions")
    context.close()
    assert not violations, violations
    assert not wide, wide
