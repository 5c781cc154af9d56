"""A large study's export in headless Chromium (phone 390×844 and desktop 1280×800): the dashboard's link leads to
the export's page, the file is asked for, the page refreshes itself until it is ready, and the file downloaded is
the export; axe-core finds no serious or critical violation on the page, before and after."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from django.test import Client
from django.urls import reverse

from analysis import export_files
from tests.a11y import axe_violations
from tests.screenshots import screenshot

from .builders import build_rating_study, participants_from_counts

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a-long-test-password"


def _worker(go: threading.Event):
    """The queue's part: the file written on a thread of its own, as a worker would (no broker here), once `go` is
    set, so that the page is seen waiting and the file reaches it through the page's poller."""

    def dispatch(file_id: int) -> None:
        def write() -> None:
            try:
                go.wait(60)
                export_files.export_file_write(file_id)
            finally:
                connections.close_all()

        threading.Thread(target=write, daemon=True).start()

    return dispatch


def test_a_large_studys_export_is_prepared_then_downloaded(
    settings, live_server, page_at, tmp_path, monkeypatch
):
    go = threading.Event()
    monkeypatch.setattr(export_files, "_dispatch", _worker(go))
    people = participants_from_counts("human", {1: 30, 2: 50, 3: 20})
    people += participants_from_counts("gpt4", {1: 20, 2: 40, 3: 40})
    study = build_rating_study(slug="large", conditions=["human", "gpt4"], participants=people).study
    user = get_user_model().objects.create_superuser(username="researcher", email="", password=PASSWORD)
    settings.EXPORT_FILE_ABOVE_PARTICIPANTS = 10**9
    client = Client()
    client.force_login(user)
    streamed = b"".join(
        client.get(reverse("analysis:export", args=[study.slug, "ratings"])).streaming_content
    )
    settings.EXPORT_FILE_ABOVE_PARTICIPANTS = 5

    for viewport in ("phone", "desktop"):
        page = page_at(viewport)
        page.set_default_timeout(120_000)
        page.goto(f"{live_server.url}/admin/login/?next={reverse('analysis:dashboard', args=[study.slug])}")
        page.fill("#id_username", "researcher")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit], input[type=submit]")
        page.wait_for_url(f"**{reverse('analysis:dashboard', args=[study.slug])}")
        page.get_by_role("link", name="Ratings (long format, CSV)").first.click()
        page.wait_for_url(f"**{reverse('analysis:export_file', args=[study.slug, 'ratings'])}")
        assert axe_violations(page) == []
        screenshot(page, f"export-file-{viewport}-asked")
        go.clear()
        page.get_by_role("button", name="Prepare").click()
        page.get_by_text("Preparing a new file").wait_for()
        assert axe_violations(page) == []
        screenshot(page, f"export-file-{viewport}-preparing")
        go.set()
        download_link = page.get_by_role("link", name="Download large-ratings-declared-exclusions.csv")
        page.get_by_text(
            "Ready: prepared at"
        ).wait_for()  # the page asks every 3 s and shows the file once ready
        download_link.wait_for()
        assert "200 rows" in page.content()
        assert axe_violations(page) == []
        screenshot(page, f"export-file-{viewport}-ready")
        with page.expect_download() as download:
            download_link.click()
        path = tmp_path / f"{viewport}.csv"
        download.value.save_as(path)
        assert download.value.suggested_filename == "large-ratings-declared-exclusions.csv"
        assert path.read_bytes() == streamed
