"""The create → publish → approve path in the admin, in Chromium, on a desktop and a phone viewport."""

import pytest

from recruiting.submissions import submission_status_apply
from tests.a11y import axe_violations
from tests.browser_login import sign_in as log_in
from tests.factories import AttentionCheckFactory
from tests.screenshots import screenshot

from .conftest import enroll, finish, link_build

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True, scope="module")
def _admin_loaded():
    """Loads the URLconf and the admin's modules up front, so the first page is not the one that pays."""
    from django.contrib import admin
    from django.urls import reverse

    reverse("admin:index")
    admin.autodiscover()


def sign_in(page, live_server, django_user_model, next_url):
    django_user_model.objects.create_user(
        username="researcher", password="researcher-pass-123", is_staff=True, is_superuser=True
    )
    log_in(page, live_server.url, "researcher", "researcher-pass-123", next_path=next_url)


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_a_researcher_creates_publishes_and_approves_from_the_admin(
    live_server, browser, prolific, django_user_model, viewport
):
    size = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}[viewport]
    context = browser.new_context(viewport=size, is_mobile=viewport == "phone")
    page = context.new_page()
    page.set_default_timeout(30_000)  # the machine is shared: the first admin page pays for its imports
    link = link_build(created=False, auto_approve=False)
    AttentionCheckFactory(study=link.study, after_item=1, expected_value=2)
    change = f"/admin/recruiting/prolificstudy/{link.pk}/change/"
    sign_in(page, live_server, django_user_model, change)

    page.get_by_role("button", name="Create draft on Prolific").click()
    page.wait_for_url(f"**{change}")
    assert "Created on Prolific as a draft" in page.locator(".messagelist").inner_text()
    link.refresh_from_db()
    assert prolific.studies[link.prolific_study_id]["status"] == "UNPUBLISHED"
    screenshot(page, f"prolific-created-{viewport}")

    page.get_by_role("button", name="Publish").click()
    page.wait_for_url(f"**{change}")
    assert page.locator("#prolific-state").inner_text() == "Active"
    assert prolific.studies[link.prolific_study_id]["status"] == "ACTIVE"

    # Three participants finish; Prolific says their submissions await review; one failed the check.
    for pid, fail in (("PGOOD1", False), ("PGOOD2", False), ("PBAD", True)):
        participant, sub = enroll(link, pid, prolific)
        finish(participant, fail_checks=fail)
        prolific.set_status(sub["id"], "AWAITING REVIEW")
        submission_status_apply(link=link, submission_id=sub["id"], pid=pid, status="AWAITING REVIEW")
    participant, sub = enroll(link, "PGONE", prolific)  # returned on Prolific, still active here
    prolific.set_status(sub["id"], "RETURNED")
    page.reload()
    assert page.locator("#decisions").get_by_text("PBAD").is_visible()
    screenshot(page, f"prolific-review-{viewport}")

    # Prolific answers 500 to the approval, and to reading the submissions back: the page says what waits.
    prolific.fail("submissions/bulk-approve/", [500])
    prolific.fail("submissions/sub", [500] * 4)
    page.get_by_role("button", name="Approve 2 passed").click()
    page.wait_for_url(f"**{change}")
    waiting = "2 approvals are waiting for Prolific to confirm; checking again in 5 minutes."
    assert page.locator(".messagelist").inner_text().strip() == waiting
    assert page.locator("#approvals-pending").inner_text() == waiting
    assert axe_violations(page) == []
    screenshot(page, f"prolific-approvals-pending-{viewport}")

    page.get_by_role("button", name="Reconcile now").click()  # what the scheduled read-back does
    page.wait_for_url(f"**{change}")
    assert dict(prolific.approvals) == {"PGOOD1": 1, "PGOOD2": 1}
    assert page.locator("#approvals-pending").count() == 0
    page.get_by_role("button", name="Reconcile now").click()
    page.wait_for_url(f"**{change}")
    rows = page.locator("#participants-beside tbody tr")
    assert rows.count() == 4
    assert page.locator("#participants-beside tr.mismatch").count() == 0  # PGONE freed by the sync
    assert "APPROVED" in page.locator("#participants-beside tr", has_text="PGOOD1").inner_text()
    screenshot(page, f"prolific-approved-{viewport}")
    context.close()
