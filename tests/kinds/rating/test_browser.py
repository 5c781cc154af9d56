"""An analyst signs in through the admin login, opens the dashboard and downloads the ratings CSV."""

import csv
import io

import pytest
from django.contrib.auth.models import Group

from analysis.permissions import ANALYSTS_GROUP
from tests.analysis.builders import build_rating_study, two_conditions_rated
from tests.browser_login import sign_in
from tests.screenshots import screenshot


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_an_analyst_signs_in_opens_the_dashboard_and_downloads_the_ratings(
    live_server, page, django_user_model
):
    people = two_conditions_rated()
    study = build_rating_study(slug="browser", conditions=["human", "gpt4"], participants=people).study
    user = django_user_model.objects.create_user(
        username="analyst", password="analyst-pass-123", is_staff=True
    )
    user.groups.add(Group.objects.get_or_create(name=ANALYSTS_GROUP)[0])

    from analysis import snapshots

    snapshots.snapshot_compute(study_id=study.pk, baseline=None, no_exclusions=False)  # what the worker does
    sign_in(page, live_server.url, "analyst", "analyst-pass-123", next_path=f"/analysis/{study.slug}/")
    assert page.locator("h1").inner_text().startswith(study.title)
    assert page.locator("figure svg").count() == 3
    assert page.get_by_text("gpt4 vs human").first.is_visible()

    with page.expect_download() as info:
        page.get_by_role("link", name="Ratings (long format, CSV)").click()
    download = info.value
    assert download.suggested_filename == f"{study.slug}-ratings-declared-exclusions.csv"
    with open(download.path(), encoding="utf-8") as fh:
        rows = list(csv.DictReader(io.StringIO(fh.read())))
    assert len(rows) == 200
    assert sum(r["condition"] == "gpt4" and r["value"] == "3" for r in rows) == 40


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_waves_dashboard_and_family_show_the_drift_warning_once_and_pass_axe(
    live_server, page_at, django_user_model
):
    """A wave whose re-raters drifted: the dashboard says so once, in plain words, on a phone and a desktop, and
    the dashboard and the admin's family view pass axe. SCREENSHOTS=DIR keeps the screenshots (tests/screenshots.py)."""
    from django.test import Client
    from django.urls import reverse

    from analysis import snapshots
    from studies.models import Response
    from studies.services import study_launch
    from studies.waves import study_extend
    from tests.a11y import axe_violations

    from .test_waves import seed_study, walk

    wave = study_extend(parent=seed_study(), new_slug="wave1", conditions=["llama", "qwen"], rerate_share=0.2)
    for name in ("llama", "qwen"):
        condition = wave.conditions.get(name=name)
        Response.objects.bulk_create(
            Response(prompt=p, condition=condition, text=f"{name}: {p.dialogue_id}", source="generated")
            for p in wave.prompts.all()
        )
    study_launch(study=wave)
    for i in range(10):
        walk(Client(), wave, f"wavepid{i:03d}")
    snapshots.snapshot_compute(study_id=wave.pk, baseline=None, no_exclusions=True)  # what the worker does
    django_user_model.objects.create_superuser(username="analyst", email="", password="analyst-pass-123")
    violations = []
    for viewport in ("phone", "desktop"):
        page = page_at(viewport)
        sign_in(
            page,
            live_server.url,
            "analyst",
            "analyst-pass-123",
            next_path="/analysis/wave1/%3Fexclusions%3Dnone",
            lands="**/analysis/wave1/?exclusions=none",
        )
        warning = page.locator("#drift-warning")
        assert warning.count() == 1 and warning.is_visible()
        assert page.content().count("today's raters judge") == 1  # once, not again among the notes
        violations += axe_violations(page)
        screenshot(page, f"wave-dashboard-{viewport}")
        page.goto(live_server.url + reverse("admin:studies_study_family", args=[wave.pk]))
        assert page.locator("#family tbody tr").count() == 2
        violations += axe_violations(page)
        screenshot(page, f"wave-family-{viewport}")
    assert violations == []
