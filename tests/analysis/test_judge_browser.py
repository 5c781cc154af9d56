"""An analyst reads a judge report on a phone and on a desktop: verdict first, tables that scroll inside their own
region, no axe-core violation."""

import pytest

from analysis import judge_ahead
from tests.a11y import axe_violations
from tests.analysis.builders import two_emotions_rated
from tests.browser_login import sign_in
from tests.screenshots import screenshot

from .builders import build_rating_study
from .judge_builders import judge_create, judge_ratings_create


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_judge_report_on_a_phone_and_a_desktop(live_server, page_at, django_user_model):
    people = two_emotions_rated()
    study = build_rating_study(
        slug="judge-browser",
        conditions=["human", "gpt4", "newmodel"],
        participants=people,
        baseline="human",
        prompts_per_emotion=150,
    ).study
    judge = judge_create(study)
    judge_ratings_create(
        judge,
        agree=0.85,
        screen={"newmodel": {1: 0.05, 2: 0.2, 3: 0.75}},
        rate_all=("human", "gpt4"),
        pending=4,
        seed=3,
    )
    judge_ahead.judge_report_compute(study_id=study.pk, judge_id=judge.pk)  # what the worker does
    django_user_model.objects.create_user(username="staffer", password="staff-pass-123", is_staff=True)
    url = f"{live_server.url}/analysis/{study.slug}/judges/{judge.name}/"
    for viewport in ("phone", "desktop"):
        page = page_at(viewport)
        sign_in(
            page, live_server.url, "staffer", "staff-pass-123", next_path=url.removeprefix(live_server.url)
        )
        verdict = page.locator("p.verdict")
        assert "screen models for this study" in verdict.inner_text()
        screening = page.get_by_role(
            "region", name="Screening: conditions people have not rated, ranked by the judge"
        )
        assert "newmodel" in screening.inner_text()
        shares = page.get_by_role(
            "region", name="Each condition's shares: human-only beside prediction-powered"
        )
        assert (
            "n/a" not in shares.locator("tr", has_text="gpt4").first.inner_text()
        )  # a PPI interval is shown
        # Wide tables scroll inside their region: the page itself never scrolls sideways.
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        screenshot(page, f"judge-report-{viewport}")
        assert axe_violations(page) == []
