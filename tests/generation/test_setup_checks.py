"""What a researcher setting up generation in the admin is told before and after sending: a provider's Test
connection (model and latency, or what to check; never the key), the system prompt filled like the template
(an unknown placeholder refused), line breaks stored and sent as LF, and a regeneration that gives the same text
back under a fixed seed said plainly and not repeated."""

import json
import socket
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from generation.models import GenerationItem, LLMConditionConfig, Provider
from generation.services.dispatch import generation_run_in_process
from generation.services.running import SAME_TEXT_FLAG
from studies.models import Prompt, Response, Study
from tests.studies.helpers import PUBLIC_HEADER

from .conftest import (
    TEST_KEY,
    anthropic_body,
    condition_config_post,
    json_response,
    make_provider,
    make_study,
    openai_body,
)

CHAT = "/v1/chat/completions"
REFUSED_WITH_KEY = {
    "error": {"message": f"Incorrect API key provided: {TEST_KEY}", "code": "invalid_api_key"}
}


def connection_page(client, provider, model="gpt-test"):
    return client.post(
        reverse("admin:generation_provider_test", args=[provider.id]), {"model": model}
    ).content.decode()


# --- Test connection ----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_working_provider_shows_the_model_that_answered_and_the_latency(
    staff_client, openai_provider, httpserver
):
    httpserver.expect_request(CHAT).respond_with_json(openai_body("OK", model="gpt-test-2025-01-01"))
    page = connection_page(staff_client, openai_provider)
    assert "It works." in page and "gpt-test-2025-01-01" in page and " ms" in page
    sent = json.loads(httpserver.log[0][0].get_data())
    assert sent["model"] == "gpt-test" and sent["max_tokens"] == 5  # a cheap call
    assert TEST_KEY not in page


@pytest.mark.django_db
def test_a_refused_key_names_the_variable_and_never_shows_the_key_even_when_the_provider_quotes_it(
    staff_client, openai_provider, httpserver
):
    httpserver.expect_request(CHAT).respond_with_json(REFUSED_WITH_KEY, status=401)
    page = connection_page(staff_client, openai_provider)
    assert "It does not work yet." in page
    assert "refused the key (HTTP 401)" in page and "TEST_GEN_API_KEY" in page
    assert TEST_KEY not in page


@pytest.mark.django_db
def test_a_base_url_without_v1_gets_a_404_and_the_hint_to_add_it(staff_client, api_key, httpserver):
    provider = make_provider(httpserver, base_url=httpserver.url_for("/"))
    httpserver.expect_request("/chat/completions").respond_with_data("404 page not found", status=404)
    page = connection_page(staff_client, provider)
    assert "Not found (HTTP 404)" in page and "gpt-test" in page
    assert "This base URL has no /v1" in page


@pytest.mark.django_db
def test_a_provider_that_does_not_answer_in_time_says_so(staff_client, api_key, httpserver):
    provider = make_provider(httpserver, timeout_seconds=0.3)

    def slow(request):
        time.sleep(1.0)
        return json_response(openai_body())

    httpserver.expect_request(CHAT).respond_with_handler(slow)
    page = connection_page(staff_client, provider)
    assert "No reply from" in page and "within 0.3 s" in page


@pytest.mark.django_db
def test_a_refused_connection_names_the_address_to_check(staff_client, api_key, httpserver):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = make_provider(httpserver, base_url=f"http://127.0.0.1:{port}/v1")
    page = connection_page(staff_client, provider)
    assert "Could not connect to" in page and f"127.0.0.1:{port}" in page


@pytest.mark.django_db
def test_the_provider_pages_link_to_the_test_and_it_offers_the_configured_model(
    staff_client, openai_provider
):
    make_study(provider=openai_provider, n_prompts=1)
    test_url = reverse("admin:generation_provider_test", args=[openai_provider.id])
    for url in (
        reverse("admin:generation_provider_changelist"),
        reverse("admin:generation_provider_change", args=[openai_provider.id]),
    ):
        assert test_url in staff_client.get(url).content.decode()
    assert 'value="gpt-test"' in staff_client.get(test_url).content.decode()


# --- the system prompt ----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_unknown_placeholder_in_the_system_prompt_is_refused_in_the_admin(staff_client, openai_provider):
    condition, response = condition_config_post(
        staff_client,
        openai_provider,
        system_prompt="You comfort a person who feels {feeling}.",
        prompt_template="Situation: {situation}",
    )
    page = response.content.decode()
    assert "Unknown placeholder(s) in the system prompt: {feeling}" in page
    assert not LLMConditionConfig.objects.filter(condition=condition).exists()


@pytest.mark.django_db
def test_a_stored_system_prompt_with_an_unknown_placeholder_stops_generation_before_anything_is_sent(
    openai_provider, httpserver
):
    study = make_study(provider=openai_provider, n_prompts=2)
    LLMConditionConfig.objects.update(system_prompt="Feeling: {mood}")  # saved before the check existed
    with pytest.raises(Exception, match=r"gpt: Unknown placeholder\(s\) in the system prompt: \{mood\}"):
        call_command(
            "generate_responses",
            study.slug,
            "--in-process",
            "--threads",
            "1",
            "--no-progress",
            stdout=StringIO(),
        )
    assert len(httpserver.log) == 0 and not GenerationItem.objects.exists()


# --- line breaks ------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_line_breaks_typed_in_the_admin_are_stored_and_sent_as_lf(staff_client, openai_provider, httpserver):
    condition, _ = condition_config_post(
        staff_client,
        openai_provider,
        n_prompts=1,
        system_prompt="You are kind.\r\nThe person feels {emotion}.\rBe brief.",
        prompt_template="Situation: {situation}\r\n\r\nThey said: {speaker_utterance}",
    )
    study = condition.study
    config = LLMConditionConfig.objects.get(condition=condition)
    assert config.system_prompt == "You are kind.\nThe person feels {emotion}.\nBe brief."
    assert config.prompt_template == "Situation: {situation}\n\nThey said: {speaker_utterance}"

    httpserver.expect_request(CHAT).respond_with_json(openai_body())
    call_command(
        "generate_responses", study.slug, "--condition", "gpt4", "--in-process", "--threads", "1", "--no-progress",
        stdout=StringIO(),
    )  # fmt: skip
    sent = httpserver.log[0][0].get_data(as_text=True)
    assert "\\r" not in sent
    system = json.loads(sent)["messages"][0]["content"]
    emotion = Prompt.objects.get(study=study).emotion.name
    assert system == f"You are kind.\nThe person feels {emotion}.\nBe brief."


@pytest.mark.django_db
def test_a_corpus_with_crlf_inside_its_cells_is_stored_with_lf(tmp_path):
    row = [
        "hit:1_conv:1",
        "sad",
        "negative",
        "I lost my job.\r\nIt was hard.",
        "Hi\rthere",
        "So sorry.\r\n",
        "Oh no.",
    ]
    lines = [",".join(PUBLIC_HEADER), ",".join(f'"{cell}"' for cell in row)]
    path = tmp_path / "corpus.csv"
    path.write_bytes("\r\n".join(lines).encode() + b"\r\n")
    call_command("import_corpus", "crlf-study", str(path), stdout=StringIO(), stderr=StringIO())
    prompt = Prompt.objects.get(study=Study.objects.get(slug="crlf-study"))
    assert (prompt.situation, prompt.speaker_utterance) == ("I lost my job.\nIt was hard.", "Hi\nthere")
    assert not Response.objects.filter(text__contains="\r").exists()


@pytest.mark.django_db
def test_updates_and_bulk_writes_store_lf_too(openai_provider):
    study = make_study(provider=openai_provider, n_prompts=2)
    Prompt.objects.filter(study=study).update(situation="one\r\ntwo")
    assert set(Prompt.objects.filter(study=study).values_list("situation", flat=True)) == {"one\ntwo"}


# --- regenerating under a fixed seed ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_regeneration_that_returns_the_same_text_is_said_plainly_and_not_repeated_under_that_seed(
    staff_client, openai_provider, httpserver, django_capture_on_commit_callbacks
):
    study = make_study(provider=openai_provider, n_prompts=1)  # seed 11
    flagged_text = "As an AI language model, I am sorry."
    httpserver.expect_request(CHAT).respond_with_json(openai_body(flagged_text))
    call_command(
        "generate_responses", study.slug, "--in-process", "--threads", "1", "--no-progress", stdout=StringIO()
    )
    response = Response.objects.get(condition__name="gpt")
    url = reverse("admin:generation_generatedresponse_changelist")

    with django_capture_on_commit_callbacks(execute=False):
        page = staff_client.post(
            url, {"action": "regenerate", "_selected_action": [response.id]}, follow=True
        ).content.decode()
    assert "sends the fixed seed 11" in page
    generation_run_in_process(item_ids=[GenerationItem.objects.get(response=response).id], threads=1)
    response.refresh_from_db()
    assert response.review == "flagged" and SAME_TEXT_FLAG in response.review_flags
    listing = staff_client.get(url).content.decode()
    assert "same text again after regenerating (change the seed or edit the text)" in listing

    calls = len(httpserver.log)
    page = staff_client.post(
        url, {"action": "regenerate", "_selected_action": [response.id]}, follow=True
    ).content.decode()
    assert "returned the same text again with seed 11" in page and "Change the condition" in page
    assert GenerationItem.objects.get(response=response).status == "done"  # nothing queued
    assert len(httpserver.log) == calls

    LLMConditionConfig.objects.update(seed=12)
    httpserver.clear_all_handlers()
    httpserver.expect_request(CHAT).respond_with_json(openai_body("That sounds so hard; I'm sorry."))
    with django_capture_on_commit_callbacks(execute=False):
        staff_client.post(url, {"action": "regenerate", "_selected_action": [response.id]})
    generation_run_in_process(item_ids=[GenerationItem.objects.get(response=response).id], threads=1)
    response.refresh_from_db()
    assert response.text == "That sounds so hard; I'm sorry." and response.review_flags == []


@pytest.mark.django_db
def test_the_terminal_test_uses_the_configured_model_and_fails_with_the_reason(openai_provider, httpserver):
    from django.core.management import CommandError

    make_study(provider=openai_provider, n_prompts=1)
    httpserver.expect_ordered_request(CHAT).respond_with_json(openai_body("OK", model="gpt-test-0613"))
    httpserver.expect_ordered_request(CHAT).respond_with_json(REFUSED_WITH_KEY, status=401)
    out = StringIO()
    call_command("provider_test", openai_provider.name, stdout=out)
    assert "answered as model gpt-test-0613" in out.getvalue()
    assert json.loads(httpserver.log[0][0].get_data())["model"] == "gpt-test"
    with pytest.raises(CommandError, match="refused the key") as refused:
        call_command("provider_test", openai_provider.name, stdout=StringIO())
    assert TEST_KEY not in str(refused.value)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("base_url", "warned"),
    [
        ("http://vllm:8000", True),
        ("http://vllm:8000/v1", False),
        ("https://generativelanguage.googleapis.com/v1beta/openai/", False),
    ],
)
def test_saving_an_openai_compatible_provider_without_a_version_in_its_url_warns(
    staff_client, settings, base_url, warned
):
    # The operator's own Compose service is allow-listed by name; Gemini's key is bound to Gemini's host.
    key_env = "GEMINI_API_KEY" if "googleapis" in base_url else "LOCAL_API_KEY"
    settings.PROVIDER_URL_ALLOWLIST = [*settings.PROVIDER_URL_ALLOWLIST, "vllm"]
    page = staff_client.post(
        reverse("admin:generation_provider_add"),
        {
            "name": "local",
            "kind": "openai",
            "base_url": base_url,
            "api_key_env": key_env,
            "requests_per_minute": 60,
            "tokens_per_minute": 100000,
            "max_concurrency": 2,
            "timeout_seconds": 30,
            "max_attempts": 3,
            "price_input_per_million": 0,
            "price_output_per_million": 0,
        },
        follow=True,
    ).content.decode()
    assert Provider.objects.get(name="local").base_url == base_url  # a Docker service name is a host too
    assert ("has no version in its path" in page) is warned


@pytest.mark.django_db
def test_a_base_url_that_is_not_a_url_is_refused(staff_client):
    page = staff_client.post(
        reverse("admin:generation_provider_add"),
        {"name": "bad", "kind": "openai", "base_url": "http://exa mple/v1", "api_key_env": "LOCAL_API_KEY"},
    ).content.decode()
    assert "Enter a valid URL." in page and not Provider.objects.exists()


@pytest.mark.django_db
def test_an_anthropic_provider_is_tested_through_its_own_wire_format(
    staff_client, anthropic_provider, httpserver
):
    httpserver.expect_request("/v1/messages").respond_with_json(anthropic_body("OK", model="claude-loop-1"))
    page = connection_page(staff_client, anthropic_provider, model="claude-loop")
    assert "It works." in page and "claude-loop-1" in page
    sent = json.loads(httpserver.log[0][0].get_data())
    assert sent["model"] == "claude-loop" and sent["max_tokens"] == 5
