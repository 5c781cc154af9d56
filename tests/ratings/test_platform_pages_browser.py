"""The pages a recruiting platform shapes (studies/platforms/), in Chromium at 390×844 and 1280×800, axe clean: MTurk's
preview and its completion form posting to the worker's MTurk host, and Prolific's returned page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from studies.models import Participant
from tests.a11y import axe_violations
from tests.factories import rating_study_build
from tests.screenshots import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
MTURK = "workerId=W1&assignmentId=A1&hitId=H1&turkSubmitTo=https%3A%2F%2Fworkersandbox.mturk.com"


@pytest.mark.parametrize("viewport", ["phone", "desktop"])
def test_mturk_and_prolific_pages_follow_the_participants_platform(live_server, page_at, viewport):
    study = rating_study_build(conditions=1, prompts=4, items_per_participant=2, platform="mturk")
    page = page_at(viewport)
    base = f"{live_server.url}/s/{study.slug}/"
    violations = []

    page.goto(f"{base}?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H1")
    expect(page.locator(".notice")).to_contain_text("Accept the HIT to start.")
    violations += axe_violations(page)
    screenshot(page, f"platform-mturk-preview-{viewport}")

    page.goto(f"{base}?{MTURK}")
    expect(page.locator("input[name=step]")).to_have_value("consent")
    Participant.objects.filter(external_id="W1").update(
        status=Participant.Status.COMPLETED, completion_code="C0DE"
    )
    page.goto(f"{base}step/")
    form = page.locator("form[action='https://workersandbox.mturk.com/mturk/externalSubmit']")
    expect(form.locator("input[name=assignmentId]")).to_have_value("A1")
    expect(form.get_by_role("button", name="Submit the HIT to Mechanical Turk")).to_be_visible()
    violations += axe_violations(page)
    screenshot(page, f"platform-mturk-done-{viewport}")

    study.platform = "prolific"
    study.save(update_fields=["platform"])
    page.goto(f"{base}?PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X1")
    Participant.objects.filter(external_id="P1").update(status=Participant.Status.RETURNED)
    page.goto(f"{base}step/")
    expect(page.locator("main")).to_contain_text("“Return submission” on Prolific")
    violations += axe_violations(page)
    screenshot(page, f"platform-prolific-returned-{viewport}")
    assert violations == []
