"""The judge's admin pages in headless Chromium, on a phone (390×844) and a desktop (1280×800): a run page with
progress, spend and a failed rating, and the judge's form; axe-core finds no serious or critical violation and
nothing scrolls the page sideways."""

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from playwright.sync_api import expect

from generation.judge_models import JudgeRating
from generation.services import judging
from tests.a11y import axe_violations
from tests.browser_login import sign_in
from tests.screenshots import screenshot

from .conftest import make_provider, make_study
from .judge_helpers import make_judge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "a-long-test-password"


def _login(page, live_server):
    sign_in(page, live_server.url, "researcher", PASSWORD)


def test_the_judge_pages_on_a_phone_and_a_desktop(live_server, page_at, httpserver, api_key):
    get_user_model().objects.create_superuser(username="researcher", email="", password=PASSWORD)
    provider = make_provider(httpserver)
    study = make_study(provider=provider, n_prompts=6)
    judge = make_judge(study, provider, name="gpt-judge", screens_new_conditions=True)
    judging.judge_enqueue(judge=judge)
    ratings = list(JudgeRating.objects.filter(judge=judge).order_by("id"))
    for rating, value in zip(ratings[:4], [3, 2, 3, 1], strict=True):
        JudgeRating.objects.filter(id=rating.id).update(
            status="done", value=value, cost=Decimal("0.00077"), input_tokens=300, output_tokens=2
        )
    JudgeRating.objects.filter(id=ratings[4].id).update(
        status="failed",
        attempts=4,
        error_kind="unparseable",
        last_error="unparseable: the reply names none of the labels (Good, Okay, Bad): 'It is a thoughtful reply "
        "that acknowledges the feeling' (gave up after 4 attempts)",
        reply_text="It is a thoughtful reply that acknowledges the feeling",
    )
    urls = {
        "run": reverse("admin:generation_judge_run", args=[judge.pk]),
        "change": reverse("admin:generation_judge_change", args=[judge.pk]),
    }
    violations = []
    for viewport in ("phone", "desktop"):
        page = page_at(viewport)
        _login(page, live_server)
        for name, url in urls.items():
            assert page.goto(live_server.url + url).status == 200
            if name == "run":
                expect(page.locator("#judge-progress-bar")).to_be_visible()
                expect(page.get_by_role("button", name="Run judge")).to_be_visible()
                expect(page.locator("#judge-errors")).to_contain_text("Failed ×1: unparseable")
            violations += axe_violations(page)
            assert page.evaluate("document.documentElement.scrollWidth <= innerWidth + 1"), (viewport, name)
            screenshot(page, f"judge-admin-{name}-{viewport}")
    assert violations == []


def test_a_judge_on_the_test_model_runs_and_its_page_says_so_on_a_phone_and_a_desktop(live_server, page_at):
    """A fresh `make run`'s test model as a judge: run from its page with no key, every rating done, the page marked."""
    from generation.models import Provider
    from generation.services.running import run_until_settled

    get_user_model().objects.create_superuser(username="researcher", email="", password=PASSWORD)
    provider = Provider(name="test-model", kind="test", max_concurrency=4, requests_per_minute=6000)
    provider.full_clean()
    provider.save()
    study = make_study(provider=provider, n_prompts=4)
    judge = make_judge(study, provider, name="trial-judge", model="test-model")
    started = judging.judge_start(judge=judge, dispatch=False)
    for rating_id in started.rating_ids:
        run_until_settled(lambda i=rating_id: judging.judge_rating_run(rating_id=i))
    assert set(JudgeRating.objects.filter(judge=judge).values_list("status", flat=True)) == {"done"}
    violations = []
    for viewport in ("phone", "desktop"):
        page = page_at(viewport)
        _login(page, live_server)
        assert (
            page.goto(live_server.url + reverse("admin:generation_judge_run", args=[judge.pk])).status == 200
        )
        expect(page.locator("#judge-placeholder")).to_contain_text("Test model: placeholder verdicts")
        expect(page.locator("#judge-progress-bar")).to_be_visible()
        violations += axe_violations(page)
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth + 1"), viewport
        screenshot(page, f"judge-test-model-run-{viewport}")
    assert violations == []
