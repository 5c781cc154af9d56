"""The dashboard in headless Chromium (phone 390×844 and desktop 1280×800) while its analysis is computed on a
worker: the page says so, asks the server through the shared poller (static/analysis/poll.js) and, once the
worker's result is in, says it is ready and offers it, without a reload; axe-core finds no serious or critical
violation before and after."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from analysis import snapshots
from tests.a11y import axe_violations
from tests.screenshots import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_dashboard_says_when_the_workers_result_is_in(
    live_server, page_at, rated_study, analyst, monkeypatch
):
    asked = []
    monkeypatch.setattr(snapshots, "_dispatch", lambda **kwargs: asked.append(kwargs))
    client = Client()
    client.force_login(analyst)  # an analyst, not staff: the admin's login is not theirs
    session = client.cookies["sessionid"].value
    url = reverse("analysis:dashboard", args=[rated_study.slug])
    # One side of the "No exclusions" switch a viewport, so that each page finds its result not yet computed.
    for viewport, query, no_exclusions in (("phone", "", False), ("desktop", "?exclusions=none", True)):
        page = page_at(viewport)
        page.context.add_cookies([{"name": "sessionid", "value": session, "url": live_server.url}])
        page.goto(f"{live_server.url}{url}{query}")
        status = page.locator("#analysis-status")
        assert "Computing the analysis…" in status.inner_text()
        assert axe_violations(page) == []
        screenshot(page, f"dashboard-poll-{viewport}-computing")

        snapshots.snapshot_compute(study_id=rated_study.pk, baseline=None, no_exclusions=no_exclusions)
        page.get_by_role("link", name="Show the new results").wait_for()  # asked every 3 s
        assert "New results are ready (computed at" in status.inner_text()
        assert "status-ready" in (status.get_attribute("class") or "")
        assert axe_violations(page) == []
        screenshot(page, f"dashboard-poll-{viewport}-ready")
        page.get_by_role("link", name="Show the new results").click()
        page.wait_for_url(f"**{url}{query}")
        assert "Up to date: computed at" in page.locator("#analysis-status").inner_text()
    assert {call["no_exclusions"] for call in asked} == {False, True}
