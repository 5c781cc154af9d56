"""A provider's key typed in the admin and a model picked from the provider's own list, in headless Chromium on a
phone (390×844) and a desktop (1280×800): the key field stays empty after saving, Test connection works at once,
the LLM condition is added and configured on one page with its model chosen from the list (which follows the
provider chosen, through the page's script), and the saved page links on to generation. axe-core finds no serious
or critical violation and nothing scrolls sideways."""

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from generation.models import LLMConditionConfig, Provider
from studies.models import Condition
from tests.a11y import axe_violations
from tests.screenshots import screenshot

from .conftest import TEST_KEY, openai_body
from .test_judge_browser import PASSWORD, _login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
MODELS = {"object": "list", "data": [{"id": n, "object": "model"} for n in ("loop-small", "loop-large")]}


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= innerWidth + 1")


def test_a_key_typed_in_the_admin_and_a_model_picked_from_the_list(live_server, page_at, httpserver):
    get_user_model().objects.create_superuser(username="researcher", email="", password=PASSWORD)
    from tests.factories import PromptFactory, StudyFactory

    study = StudyFactory(slug="keys-study")
    PromptFactory(study=study)
    httpserver.expect_request("/v1/models").respond_with_json(MODELS)
    httpserver.expect_request("/v1/chat/completions").respond_with_json(openai_body("OK", model="loop-small"))
    violations = []
    for viewport in ("phone", "desktop"):
        page = page_at(viewport)
        _login(page, live_server)
        name = f"loop-{viewport}"

        page.goto(f"{live_server.url}/admin/generation/provider/add/")
        page.locator("#id_name").fill(name)
        page.locator("#id_base_url").fill(httpserver.url_for("/v1"))
        page.locator("#id_api_key").fill(TEST_KEY)
        violations += axe_violations(page)
        assert no_sideways_scroll(page), viewport
        screenshot(page, f"provider-key-add-{viewport}")
        page.get_by_role("button", name="Save and continue editing").click()
        expect(page.locator(".messagelist")).to_contain_text("was added successfully")
        expect(page.get_by_text("A key is set (entered here, sent only to http://localhost:")).to_be_visible()
        assert page.locator("#id_api_key").input_value() == "" and TEST_KEY not in page.content()
        violations += axe_violations(page)
        screenshot(page, f"provider-key-set-{viewport}")

        page.get_by_role("link", name="Test connection").first.click()
        expect(page.locator("#id_model-models-note")).to_contain_text("2 models listed by the provider")
        page.get_by_label("Model to ask").fill("loop-small")
        page.get_by_role("button", name="Test connection").click()
        expect(page.locator("#connection-result")).to_contain_text("It works.")
        assert TEST_KEY not in page.content()
        violations += axe_violations(page)
        assert no_sideways_scroll(page), viewport
        screenshot(page, f"provider-test-{viewport}")

        # An LLM condition added and configured in one place; the model list follows the provider chosen.
        page.goto(f"{live_server.url}/admin/generation/llmconditionconfig/add/")
        expect(page.locator("#id_model-models-note")).to_contain_text("Choose a provider to see its models")
        page.locator("#id_new_study").select_option(label=str(study))
        page.locator("#id_new_name").fill(f"gpt-{viewport}")
        page.locator("#id_provider").select_option(value=str(Provider.objects.get(name=name).pk))
        expect(page.locator("#id_model-models-note")).to_contain_text("2 models listed by the provider")
        assert page.locator("#id_model-models option").count() == 2
        page.locator("#id_model").fill("loop-large")
        violations += axe_violations(page)
        assert no_sideways_scroll(page), viewport
        screenshot(page, f"llm-condition-add-{viewport}")
        page.get_by_role("button", name="Save and continue editing").click()
        expect(page.locator(".messagelist")).to_contain_text("was added successfully")
        condition = Condition.objects.get(study=study, name=f"gpt-{viewport}")
        assert (
            condition.kind == "llm"
            and LLMConditionConfig.objects.get(condition=condition).model == "loop-large"
        )
        violations += axe_violations(page)
        screenshot(page, f"llm-condition-saved-{viewport}")
        page.get_by_role("link", name="Start or see generation").click()
        expect(page.locator(f"#condition-gpt-{viewport}")).to_be_visible()
    assert violations == []
