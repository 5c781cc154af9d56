"""The pairwise kind's power form on the quotas step, in Chromium at a phone's and a desktop's size: typing a win
rate and a tie rate recomputes the plan; the page is clean under axe."""

import pytest

from studies.models import Study
from tests.a11y import axe_violations
from tests.factories import pairwise_study_build
from tests.recruiting.test_browser import sign_in
from tests.screenshots import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("size", [(390, 844), (1280, 800)], ids=["phone", "desktop"])
def test_typing_a_win_rate_recomputes_the_plan_in_the_browser(live_server, browser, django_user_model, size):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, is_mobile=size[0] < 600)
    page = context.new_page()
    page.set_default_timeout(30_000)
    study = pairwise_study_build(conditions=3, state=Study.State.DRAFT, completion_code="DONE123")
    quotas = f"/admin/studies/study/{study.pk}/setup/quotas/"
    sign_in(page, live_server, django_user_model, quotas)
    row = page.locator(".launch-power tr", has_text="arm1").first
    before = row.inner_text()
    assert "55.0 %, 25.0 %" in before
    page.get_by_label("arm1 (win rate, ties (%))").fill("60, 10")
    page.get_by_role("button", name="Recompute power").click()
    page.wait_for_url("**effect-arm1=60*")
    after = page.locator(".launch-power tr", has_text="arm1").first.inner_text()
    assert "60.0 %, 10.0 %" in after and after != before
    assert "typed on this page" in page.locator("#power-shares").inner_text()
    assert axe_violations(page) == []
    screenshot(page, f"pairwise-power-typed-{size[0]}")
    context.close()
