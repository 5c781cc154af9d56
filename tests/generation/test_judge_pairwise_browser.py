"""A pairwise study's judge in headless Chromium, on a phone (390×844) and a desktop (1280×800): the analysts' page
shows the judge's flips, calibration and strengths beside the people's, and the judge's run page counts its pairs in
both orders; axe-core finds no serious or critical violation and nothing scrolls the page sideways."""

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from playwright.sync_api import expect

from generation.judge_formats import VERDICT_A, VERDICT_B
from generation.judge_models import JudgeRating
from generation.services import judging
from tests.a11y import axe_violations
from tests.analysis.test_pairwise_analysis import QUALITY, votes
from tests.factories import pairwise_study_build
from tests.screenshots import screenshot

from .conftest import make_provider
from .judge_helpers import make_judge
from .test_judge_browser import PASSWORD
from .test_judge_browser import _login as login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_pairwise_judge_on_the_analysts_page_and_its_run_page(live_server, page_at, httpserver, api_key):
    get_user_model().objects.create_superuser(username="researcher", email="", password=PASSWORD)
    study = pairwise_study_build(conditions=3, prompts=8, items_per_participant=4, quota_per_condition=100)
    votes(study, 12)
    judge = make_judge(study, make_provider(httpserver), name="gpt-judge")
    judging.judge_enqueue(judge=judge)
    rows = JudgeRating.objects.filter(judge=judge).select_related("response__condition", "versus__condition")
    for n, row in enumerate(rows.order_by("id")):
        if n % 7 == 6:
            continue  # some still pending
        better = QUALITY[row.response.condition.name] > QUALITY[row.versus.condition.name]
        value = VERDICT_A if better or n % 5 == 0 else VERDICT_B  # every fifth says A whatever is shown
        JudgeRating.objects.filter(id=row.id).update(status="done", value=value, cost=Decimal("0.00077"))
    urls = {
        "analysis": reverse("analysis:pairwise", args=[study.slug]),
        "run": reverse("admin:generation_judge_run", args=[judge.pk]),
    }
    violations = []
    for viewport in ("phone", "desktop"):
        page = page_at(viewport)
        login(page, live_server)
        for name, url in urls.items():
            assert page.goto(live_server.url + url).status == 200
            if name == "analysis":
                expect(page.get_by_text("judge_flips.csv").first).to_be_visible()
                expect(page.get_by_text("judge_calibration.csv").first).to_be_visible()
                expect(page.locator("body")).to_contain_text("arm0 vs arm1")
            violations += axe_violations(page)
            assert page.evaluate("document.documentElement.scrollWidth <= innerWidth + 1"), (viewport, name)
            screenshot(page, f"pairwise-judge-{name}-{viewport}")
    assert violations == []
