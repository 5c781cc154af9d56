"""The analysis pages in headless Chromium pass axe-core (no serious or critical violation) on a desktop and a
phone: the list of studies, the dashboard with its exports, the same without exclusions, the EmotionBench
dashboard, and the self-contained report.html the `analyze` command writes."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from analysis import snapshots
from analysis.permissions import ANALYSTS_GROUP
from analysis.services import AnalysisOptions
from kinds.questionnaire.demo import QUESTIONNAIRE_SLUG
from kinds.rating.entry import RATING_ANALYSIS
from studies.demo.seed import demo_seed
from studies.models import Study
from tests.a11y import axe_violations
from tests.analysis.builders import two_conditions_rated
from tests.browser_login import sign_in
from tests.screenshots import screenshot

from .builders import build_rating_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def test_the_analysis_pages_pass_axe_on_a_desktop_and_a_phone(
    live_server, page_at, django_user_model, settings, tmp_path
):
    settings.VAR_DIR = tmp_path
    demo_seed(base_url=live_server.url)
    people = two_conditions_rated()
    study = build_rating_study(slug="axe-study", conditions=["human", "gpt4"], participants=people).study
    snapshots.snapshot_compute(study_id=study.pk, baseline=None, no_exclusions=False)  # what the worker does
    snapshots.snapshot_compute(study_id=study.pk, baseline=None, no_exclusions=True)
    user = django_user_model.objects.create_user(
        username="analyst", password="analyst-pass-123", is_staff=True
    )
    user.groups.add(Group.objects.get_or_create(name=ANALYSTS_GROUP)[0])
    RATING_ANALYSIS.report_write(study, AnalysisOptions(), tmp_path / "report")

    page = page_at("desktop")
    sign_in(page, live_server.url, "analyst", "analyst-pass-123", next_path="/analysis/")
    questionnaire = Study.objects.get(slug=QUESTIONNAIRE_SLUG)
    violations = []
    for viewport, size in {"desktop": DESKTOP, "phone": PHONE}.items():
        page.set_viewport_size(size)
        page.goto(f"{live_server.url}/analysis/")
        violations += axe_violations(page)
        for path in (
            f"/analysis/{study.slug}/",
            f"/analysis/{study.slug}/?exclusions=none",
            f"/analysis/{questionnaire.slug}/emotionbench/",
        ):
            response = page.goto(live_server.url + path)
            assert response.status == 200, path
            violations += axe_violations(page)
            name = path.strip("/").replace("/", "-").replace("?", "-")
            screenshot(page, f"analysis-{viewport}-{name}")
        page.goto(f"file://{tmp_path / 'report' / 'report.html'}")
        violations += axe_violations(page)
    assert violations == [], "\n".join(violations)
