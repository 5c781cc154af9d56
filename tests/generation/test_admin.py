"""The admin as a researcher uses it: configure, see what would be sent, start, review, edit, regenerate."""

import re
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from generation.models import GenerationItem, LLMConditionConfig, ResponseEdit, ResponseProvenance
from generation.services.dispatch import generation_run_in_process
from studies.models import Response

from .conftest import TEST_KEY, condition_config_post, make_study, openai_body

CHAT = "/v1/chat/completions"


def hidden_inputs(html: str) -> dict:
    fields = {}
    for tag in re.findall(r"<input[^>]*>", html):
        if 'type="hidden"' in tag:
            name = re.search(r'name="([^"]+)"', tag)
            value = re.search(r'value="([^"]*)"', tag)
            if name:
                fields[name.group(1)] = value.group(1) if value else ""
    return fields


@pytest.mark.django_db
def test_a_template_with_an_unknown_placeholder_is_refused_in_the_admin(staff_client, openai_provider):
    condition, response = condition_config_post(
        staff_client, openai_provider, prompt_template="Situation: {situation}\nFeeling: {feeling}"
    )
    assert response.status_code == 400  # the form again, with the reason
    assert "Unknown placeholder(s) in the template: {feeling}" in response.content.decode()
    assert not LLMConditionConfig.objects.filter(condition=condition).exists()


@pytest.mark.django_db
def test_the_configuration_page_shows_the_rendered_prompt_and_the_cost_before_sending(
    staff_client, openai_provider, httpserver
):
    study = make_study(provider=openai_provider, n_prompts=2)
    config = LLMConditionConfig.objects.get()
    page = staff_client.get(
        reverse("admin:generation_llmconditionconfig_change", args=[config.id])
    ).content.decode()
    first = study.prompts.order_by("id").first()
    assert f"Situation: {first.situation}" in page
    assert "2 calls" in page and "at most $" in page
    # Nothing is sent to the model: the page only asks the provider for its (free) list of models.
    assert [request.path for request, _ in httpserver.log] == ["/v1/models"]


@pytest.mark.django_db
def test_the_provider_page_says_whether_the_key_is_set_and_never_shows_it(staff_client, openai_provider):
    page = staff_client.get(
        reverse("admin:generation_provider_change", args=[openai_provider.id])
    ).content.decode()
    assert "From the environment variable TEST_GEN_API_KEY (set)." in page
    assert TEST_KEY not in page


@pytest.mark.django_db
def test_starting_without_the_key_in_the_environment_says_which_variable_and_writes_nothing(
    staff_client, openai_provider, monkeypatch
):
    study = make_study(provider=openai_provider, n_prompts=2)
    monkeypatch.delenv("TEST_GEN_API_KEY")
    url = reverse("admin:generation_study", args=[study.id])
    page = staff_client.post(url, {"action": "start"}, follow=True).content.decode()
    assert "Generation could not start" in page and "TEST_GEN_API_KEY" in page
    assert not GenerationItem.objects.exists()


@pytest.mark.django_db
def test_starting_from_the_admin_creates_the_work_and_shows_progress_and_lengths(
    staff_client, openai_provider, django_capture_on_commit_callbacks
):
    study = make_study(provider=openai_provider, n_prompts=3, conditions=("gpt", "claude"))
    url = reverse("admin:generation_study", args=[study.id])
    page = staff_client.get(url).content.decode()
    assert "Cost estimate" in page and "Situation:" in page

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = staff_client.post(url, {"action": "start", "condition": "gpt"}, follow=True)
    assert "Started: 3 new items, 3 sent to the workers." in response.content.decode()
    assert len(callbacks) == 1  # dispatch waits for the commit
    assert GenerationItem.objects.filter(condition__name="gpt", status="pending").count() == 3
    assert not GenerationItem.objects.filter(condition__name="claude").exists()
    page = response.content.decode()
    assert "data-refresh-region" in page and "studies/status.js" in page  # live progress while pending
    assert 'http-equiv="refresh"' not in page  # no reload under a screen reader's feet
    assert "0 / 3" in page and "human (baseline)" in page

    page = staff_client.post(url, {"action": "cancel", "condition": "gpt"}, follow=True).content.decode()
    assert "Cancelled 3 pending items" in page


@pytest.mark.django_db
def test_editing_a_generated_response_keeps_an_audit_trail(
    staff_client, staff_user, openai_provider, httpserver
):
    study = make_study(provider=openai_provider, n_prompts=1)
    httpserver.expect_request(CHAT).respond_with_json(openai_body("As an AI language model, I am sorry."))
    call_command(
        "generate_responses", study.slug, "--in-process", "--threads", "1", "--no-progress", stdout=StringIO()
    )
    response = Response.objects.get(condition__name="gpt")
    assert response.review == "flagged"

    changelist = staff_client.get(
        reverse("admin:generation_generatedresponse_changelist") + "?review__exact=flagged"
    ).content.decode()
    assert "reveals the model" in changelist
    assert "I miss him 0." in changelist  # each response's prompt beside it

    url = reverse("admin:generation_generatedresponse_change", args=[response.id])
    form = hidden_inputs(staff_client.get(url).content.decode())
    form["text"] = "I'm so sorry. That must be painful."
    result = staff_client.post(url, form)
    assert result.status_code == 302, result.content.decode()[:2000]

    response.refresh_from_db()
    assert (response.text, response.source, response.review) == (
        "I'm so sorry. That must be painful.",
        "edited",
        "approved",
    )
    edit = ResponseEdit.objects.get(response=response)
    assert (edit.before, edit.after, edit.editor_username) == (
        "As an AI language model, I am sorry.",
        "I'm so sorry. That must be painful.",
        staff_user.username,
    )


@pytest.mark.django_db
def test_approve_and_regenerate_from_the_review_queue(
    staff_client, openai_provider, httpserver, django_capture_on_commit_callbacks
):
    study = make_study(provider=openai_provider, n_prompts=2)
    httpserver.expect_ordered_request(CHAT).respond_with_json(openai_body("Cut off in the", finish="length"))
    httpserver.expect_ordered_request(CHAT).respond_with_json(openai_body("I'm Claude, and I'm sorry."))
    httpserver.expect_ordered_request(CHAT).respond_with_json(
        openai_body("That sounds so painful; I'm sorry.")
    )
    call_command(
        "generate_responses", study.slug, "--in-process", "--threads", "1", "--no-progress", stdout=StringIO()
    )
    truncated, revealing = Response.objects.filter(condition__name="gpt").order_by("prompt_id")
    assert truncated.review_flags == ["truncated"] and revealing.review_flags == ["reveals_model"]
    url = reverse("admin:generation_generatedresponse_changelist")

    staff_client.post(url, {"action": "approve", "_selected_action": [truncated.id]})
    truncated.refresh_from_db()
    assert truncated.review == "approved"

    # Approving one that says it is an AI asks first, and approves nothing until confirmed.
    asked = staff_client.post(url, {"action": "approve", "_selected_action": [revealing.id]})
    assert asked.status_code == 200 and "Approve responses that reveal the model?" in asked.content.decode()
    revealing.refresh_from_db()
    assert revealing.review == "flagged"

    with django_capture_on_commit_callbacks(execute=False):
        staff_client.post(url, {"action": "regenerate", "_selected_action": [revealing.id]})
    item = GenerationItem.objects.get(response=revealing)
    assert (item.status, item.regenerate) == ("pending", True)
    generation_run_in_process(item_ids=[item.id], threads=1)

    revealing.refresh_from_db()
    assert revealing.text == "That sounds so painful; I'm sorry." and revealing.review == "ok"
    assert Response.objects.filter(condition__name="gpt").count() == 2
    rows = ResponseProvenance.objects.filter(response=revealing).order_by("created_at")
    assert [row.superseded_at is None for row in rows] == [False, True]


@pytest.mark.django_db(transaction=True)
def test_without_a_broker_generation_started_in_the_admin_runs_in_the_web_process(
    staff_client, openai_provider, httpserver, settings
):
    # `make run`: no REDIS_URL, tasks eager; the admin request returns at once and background threads generate,
    # with the in-process limiter.
    from config.celery import app

    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    settings.REDIS_URL = ""
    try:
        study = make_study(provider=openai_provider, n_prompts=3)
        httpserver.expect_request(CHAT).respond_with_json(openai_body())

        staff_client.post(reverse("admin:generation_study", args=[study.id]), {"action": "start"})

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and Response.objects.filter(condition__name="gpt").count() < 3:
            time.sleep(0.2)
    finally:
        app.conf.task_always_eager = eager
    assert Response.objects.filter(condition__name="gpt").count() == 3
    assert len(httpserver.log) == 3


@pytest.mark.django_db
def test_approving_responses_that_reveal_the_model_is_confirmed_first(
    staff_client, openai_provider, httpserver
):
    study = make_study(provider=openai_provider, n_prompts=2)
    httpserver.expect_ordered_request(CHAT).respond_with_json(openai_body("I'm Claude, and I'm sorry."))
    httpserver.expect_ordered_request(CHAT).respond_with_json(openai_body("Cut off in the", finish="length"))
    call_command(
        "generate_responses", study.slug, "--in-process", "--threads", "1", "--no-progress", stdout=StringIO()
    )
    both = list(Response.objects.filter(condition__name="gpt").values_list("id", flat=True))
    url = reverse("admin:generation_generatedresponse_changelist")
    asked = staff_client.post(url, {"action": "approve", "_selected_action": both}).content.decode()
    assert "I&#x27;m Claude" in asked and 'name="confirm" value="yes"' in asked
    assert set(Response.objects.filter(id__in=both).values_list("review", flat=True)) == {"flagged"}
    staff_client.post(url, {"action": "approve", "_selected_action": both, "confirm": "yes"})
    assert set(Response.objects.filter(id__in=both).values_list("review", flat=True)) == {"approved"}
