"""An analyst signs in through the admin login, opens the dashboard and downloads the ratings CSV."""

import csv
import io

import pytest
from django.contrib.auth.models import Group

from analysis.permissions import ANALYSTS_GROUP

from .builders import build_rating_study, participants_from_counts


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_an_analyst_signs_in_opens_the_dashboard_and_downloads_the_ratings(
    live_server, page, django_user_model
):
    people = participants_from_counts("human", {1: 30, 2: 50, 3: 20}) + participants_from_counts(
        "gpt4", {1: 20, 2: 40, 3: 40}
    )
    study = build_rating_study(slug="browser", conditions=["human", "gpt4"], participants=people).study
    user = django_user_model.objects.create_user(
        username="analyst", password="analyst-pass-123", is_staff=True
    )
    user.groups.add(Group.objects.get_or_create(name=ANALYSTS_GROUP)[0])

    from analysis import snapshots

    snapshots.snapshot_compute(study_id=study.pk, baseline=None, no_exclusions=False)  # what the worker does
    page.goto(f"{live_server.url}/admin/login/?next=/analysis/{study.slug}/")
    page.fill("#id_username", "analyst")
    page.fill("#id_password", "analyst-pass-123")
    page.click("input[type=submit]")
    page.wait_for_url(f"**/analysis/{study.slug}/")
    assert page.locator("h1").inner_text().startswith(study.title)
    assert page.locator("figure svg").count() == 3
    assert page.get_by_text("gpt4 vs human").first.is_visible()

    with page.expect_download() as info:
        page.get_by_role("link", name="Ratings (long format, CSV)").click()
    download = info.value
    assert download.suggested_filename == f"{study.slug}-ratings.csv"
    with open(download.path(), encoding="utf-8") as fh:
        rows = list(csv.DictReader(io.StringIO(fh.read())))
    assert len(rows) == 200
    assert sum(r["condition"] == "gpt4" and r["value"] == "3" for r in rows) == 40
