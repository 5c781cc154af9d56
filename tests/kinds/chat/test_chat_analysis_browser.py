"""The chat study's analysts' page in headless Chromium at 390×844 and 1280×800: axe-clean, its headline, the
too-little-data warning, the figure and the tables readable (SCREENSHOTS=DIR keeps them)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from tests.a11y import axe_violations
from tests.kinds.chat.test_chat_analysis_exports import chat_study
from tests.screenshots import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


@pytest.mark.parametrize("per_cell", [4, 25])
def test_the_analysts_page_at_both_sizes(live_server, browser, per_cell):
    study = chat_study(per_cell, person_bonus=12)
    get_user_model().objects.create_superuser(username="analyst", email="", password="a-long-test-password")
    context = browser.new_context(viewport=SIZES["desktop"])
    page = context.new_page()
    page.goto(f"{live_server.url}/analysis/{study.slug}/chat/")
    page.fill("#id_username", "analyst")
    page.fill("#id_password", "a-long-test-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#headline-sentence")).to_contain_text("Conversations with person were rated")
    assert page.locator("#too-little").count() == (1 if per_cell < 20 else 0)
    violations = []
    for size, viewport in SIZES.items():
        page.set_viewport_size(viewport)
        violations += axe_violations(page)
        screenshot(page, f"chat-analysis-{per_cell}-{size}")
        # nothing but the scrolling regions is wider than the screen
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    assert not violations, violations
    context.close()
