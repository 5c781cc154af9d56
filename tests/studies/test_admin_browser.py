"""The study admin's pages in headless Chromium at 1280×800: axe-core finds no serious or critical violation,
and the study list's page links are all on screen."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from playwright.sync_api import expect

from kinds.chat.demo import CHAT_SLUG
from kinds.pairwise.demo import PAIRWISE_SLUG
from kinds.questionnaire.demo import QUESTIONNAIRE_SLUG
from kinds.rating.demo import DEMO_SLUG
from studies.demo.seed import demo_seed
from studies.models import Study, StudyAmendment
from tests.a11y import axe_violations
from tests.browser_login import sign_in
from tests.screenshots import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a-long-test-password"


@pytest.fixture
def admin_page(settings, tmp_path, live_server, page_at):
    settings.VAR_DIR = tmp_path
    demo_seed(base_url=live_server.url)
    get_user_model().objects.create_superuser(username="researcher", email="", password=PASSWORD)
    page = page_at("desktop")
    return sign_in(page, live_server.url, "researcher", PASSWORD)


def test_the_admins_study_pages_pass_axe(admin_page, live_server):
    demo = Study.objects.get(slug=DEMO_SLUG)
    questionnaire = Study.objects.get(slug=QUESTIONNAIRE_SLUG)
    draft = Study.objects.get(slug="published-sample")
    pairwise = Study.objects.get(slug=PAIRWISE_SLUG)
    urls = [
        reverse("admin:studies_study_changelist"),
        reverse("admin:studies_study_change", args=[demo.pk]),
        reverse("admin:studies_study_change", args=[questionnaire.pk]),
        reverse("admin:studies_study_status", args=[demo.pk]),
        reverse("admin:studies_study_status", args=[questionnaire.pk]),
        reverse("admin:studies_study_import") + f"?study={DEMO_SLUG}",
        reverse("admin:studies_study_state", args=[demo.pk, "close"]),
        reverse("admin:studies_study_state", args=[demo.pk, "pause"]),
        reverse("admin:studies_study_state", args=[draft.pk, "launch"]),
        reverse("admin:studies_study_amend", args=[questionnaire.pk]),
        reverse("admin:studies_study_amend", args=[pairwise.pk]) + "?field=worked_examples",
        reverse("admin:studies_study_amend", args=[demo.pk]) + "?field=exclusion_rules",
        reverse("admin:studies_study_amend", args=[demo.pk]) + "?field=worked_examples",
        # A field of the rating kind's own settings (kinds/rating/models.py), amended like the study's.
        reverse("admin:studies_study_amend", args=[demo.pk]) + "?field=scale_question",
        reverse("admin:generation_generationjob_changelist"),
        reverse("admin:generation_studies"),
    ]
    violations = []
    for url in urls:
        response = admin_page.goto(live_server.url + url)
        assert response.status == 200, url
        violations += axe_violations(admin_page)
    assert violations == []
    admin_page.goto(live_server.url + reverse("admin:studies_study_change", args=[demo.pk]))
    assert admin_page.locator("#rating_settings-group").is_visible()  # the rating kind's settings inline
    screenshot(admin_page, "admin-study-rating-settings")


def test_the_study_lists_page_links_are_not_clipped_at_1280_px(admin_page, live_server):
    admin_page.goto(live_server.url + reverse("admin:studies_study_changelist"))
    links = admin_page.locator(".study-links a")
    assert links.count() >= 3 * 3  # status, analysis and preview (and import) for each of the three studies
    width = admin_page.evaluate("innerWidth")
    # The list fits: nothing to scroll sideways, neither the page nor the table's own scroll area.
    assert admin_page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    assert admin_page.evaluate(
        "(r => r.scrollWidth <= r.clientWidth)(document.querySelector('#changelist .results'))"
    )
    for link in links.all():
        box = link.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, (link.inner_text(), box)
        hit = admin_page.evaluate(
            "([x, y]) => document.elementFromPoint(x, y)?.closest('a')?.textContent",
            [box["x"] + 2, box["y"] + box["height"] / 2],
        )
        assert hit == link.inner_text()
    screenshot(admin_page, "admin-study-list")


def test_the_live_status_refreshes_in_place_and_can_be_paused(admin_page, live_server):
    demo = Study.objects.get(slug=DEMO_SLUG)
    admin_page.goto(live_server.url + reverse("admin:studies_study_status", args=[demo.pk]))
    stamp = admin_page.locator("[data-refreshed-at]").inner_text()
    admin_page.evaluate("document.getElementById('study-state').dataset.marker = 'same page'")
    Study.objects.filter(pk=demo.pk).update(state=Study.State.PAUSED)
    # A locator waits without evaluating a string in the page (the Content-Security-Policy forbids eval).
    expect(admin_page.locator("#study-state")).to_have_text("paused", timeout=25_000)
    # Swapped in place: no reload (the marker survives), and the time stamp moved.
    assert admin_page.evaluate("document.getElementById('study-state').dataset.marker") == "same page"
    assert admin_page.locator("[data-refreshed-at]").inner_text() != stamp
    admin_page.get_by_role("button", name="Pause automatic refresh").click()
    assert admin_page.get_by_role("button", name="Resume automatic refresh").is_visible()


def test_a_frozen_field_is_amended_in_its_own_inputs_on_a_phone_and_a_desktop(admin_page, live_server):
    """The amendment page: the frozen fields in words, then the scale's own rows; a repeated value is refused on
    the page and nothing is written, a new label is recorded. axe and no sideways scrolling at both sizes."""
    demo = Study.objects.get(slug=DEMO_SLUG)
    page, violations = admin_page, []

    def look(name: str) -> None:
        for size, viewport in [("desktop", (1280, 800)), ("phone", (390, 844))]:
            page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
            violations.extend(axe_violations(page))
            assert page.evaluate("document.documentElement.scrollWidth <= innerWidth"), (name, size)
            screenshot(page, f"admin-amend-{name}-{size}")
        page.set_viewport_size({"width": 1280, "height": 800})

    page.goto(live_server.url + reverse("admin:studies_study_amend", args=[demo.pk]))
    expect(page.locator("#amendable")).to_contain_text("Option 1: Value 3, Label Good")
    look("fields")
    page.get_by_role("link", name="Scale", exact=True).click()
    expect(page.get_by_role("heading", name="Amend “Scale”")).to_be_visible()
    expect(page.get_by_label("Option 2: Label")).to_have_value("Okay")
    look("scale")
    page.get_by_label("Option 2: Value").fill("3")
    page.get_by_label("Reason").fill("The label participants saw was Fair.")
    page.get_by_role("button", name="Record the amendment").click()
    expect(page.locator(".errornote, .errorlist").first).to_contain_text("each value may be used once")
    assert not StudyAmendment.objects.exists()
    look("scale-refused")
    page.get_by_label("Option 2: Value").fill("2")
    page.get_by_label("Option 2: Label").fill("Fair")
    page.get_by_role("button", name="Record the amendment").click()
    expect(page.locator(".messagelist")).to_contain_text("Amended scale")
    assert [o["label"] for o in Study.objects.get(pk=demo.pk).scale] == ["Good", "Fair", "Bad"]
    # The exclusion rules, switched off on the study's page once participants are in, are switches here.
    page.goto(
        live_server.url + reverse("admin:studies_study_amend", args=[demo.pk]) + "?field=exclusion_rules"
    )
    expect(page.get_by_label("Exclude participants answering too fast")).to_be_enabled()
    look("exclusion-rules")
    assert violations == []


@pytest.mark.parametrize("viewport", ["phone", "desktop"])
def test_the_traps_fieldset_shows_what_each_kind_offers(settings, tmp_path, live_server, page_at, viewport):
    """One "Authenticity traps" fieldset: every trap once on the new study's form, the chat study's page with the
    hidden instruction alone; axe-core on both."""
    settings.VAR_DIR = tmp_path
    demo_seed(base_url=live_server.url)
    get_user_model().objects.create_superuser(username="researcher", email="", password=PASSWORD)
    page = sign_in(page_at(viewport), live_server.url, "researcher", PASSWORD)
    chat = Study.objects.get(slug=CHAT_SLUG)
    for name, url, traps in (
        ("new", reverse("admin:studies_study_add"), 3),
        ("chat", reverse("admin:studies_study_change", args=[chat.pk]), 1),
    ):
        assert page.goto(live_server.url + url).status == 200
        fieldset = page.locator("fieldset", has=page.get_by_role("heading", name="Authenticity traps"))
        expect(fieldset.locator("input[name^=trap_]")).to_have_count(traps)
        expect(page.locator("input[name^=trap_]")).to_have_count(traps)
        assert axe_violations(page) == []
        fieldset.scroll_into_view_if_needed()
        screenshot(page, f"admin-traps-{name}-{viewport}", full_page=False)
