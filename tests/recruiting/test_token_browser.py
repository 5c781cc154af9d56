"""The Prolific token and audience filters typed in the study's admin form, in Chromium at a phone's and a
desktop's size: saved, the token never on the page again, the page clean under axe."""

import pytest

from recruiting.models import ProlificStudy
from tests.a11y import axe_violations
from tests.screenshots import screenshot

from .conftest import link_build
from .test_browser import _admin_loaded, sign_in  # noqa: F401 (the module fixture loads the admin up front)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TYPED = "prolific-browser-token-51c2"


@pytest.mark.parametrize("size", [(390, 844), (1280, 800)], ids=["phone", "desktop"])
def test_the_token_and_filters_typed_in_the_form(live_server, browser, prolific, django_user_model, size):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, is_mobile=size[0] < 600)
    page = context.new_page()
    page.set_default_timeout(30_000)
    link = link_build(created=False)
    change = f"/admin/recruiting/prolificstudy/{link.pk}/change/"
    sign_in(page, live_server, django_user_model, change)
    page.locator("#id_token").fill(TYPED)
    page.locator("#id_filters").fill("age = 18..65\nfluent-languages = 19, 20")
    page.get_by_role("button", name="Save and continue editing").click()
    page.wait_for_url(f"**{change}")
    assert TYPED not in page.content()
    assert page.locator("#id_token").input_value() == ""
    assert "A token is stored" in page.locator("#prolificstudy_form").inner_text()
    assert page.locator("#id_filters").input_value() == "age = 18..65\nfluent-languages = 19, 20"
    assert axe_violations(page) == []
    screenshot(page, f"prolific-token-filters-{size[0]}")
    page.get_by_role("button", name="Create draft on Prolific").click()
    page.wait_for_url(f"**{change}")
    link = ProlificStudy.objects.get(pk=link.pk)
    assert prolific.tokens_seen == {f"Token {TYPED}"}
    assert prolific.studies[link.prolific_study_id]["filters"][0]["selected_range"] == {
        "lower": 18,
        "upper": 65,
    }
    assert TYPED not in page.content()
    context.close()
