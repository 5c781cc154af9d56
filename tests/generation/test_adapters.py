"""The provider adapter interface: each adapter reads its own wire format into the typed Completion, and a new wire
format is one class and one registration (a toy adapter, registered here only, generates a study end-to-end
against a loopback server without touching the others)."""

import json
import urllib.error
import urllib.request
from decimal import Decimal

import pytest
from django.urls import reverse

from generation import batches
from generation.models import GenerationItem, ResponseProvenance
from generation.providers import (
    Completion,
    PermanentProviderError,
    ProviderAdapter,
    Reply,
    adapter_batch_api,
    adapter_for,
    adapter_register,
    adapter_unregister,
    provider_complete,
)
from generation.providers.anthropic import AnthropicAdapter
from generation.providers.base import HTTPReply, status_error
from generation.providers.openai_compat import OpenAICompatAdapter
from generation.services.dispatch import generation_run_in_process, generation_start
from generation.services.prompts import GenerationSetupError, generation_conditions
from studies.models import Response

from .conftest import anthropic_body, json_response, make_provider, make_study, openai_body

pytestmark = pytest.mark.django_db


def test_the_openai_adapter_reads_its_wire_format_into_a_typed_completion(httpserver, openai_provider):
    httpserver.expect_request("/v1/chat/completions").respond_with_json(
        openai_body("There, there.", finish="length")
    )
    completion = provider_complete(
        provider=openai_provider,
        model="gpt-test",
        system="Be kind.",
        messages=[{"role": "user", "content": "I failed my exam."}],
        params={"temperature": 0.5, "max_tokens": 50, "seed": 3, "top_p": None},
    )
    assert isinstance(completion, Completion)
    assert (completion.text, completion.finish_reason, completion.truncated) == (
        "There, there.",
        "length",
        True,
    )
    assert (completion.usage_in, completion.usage_out) == (120, 14)
    assert completion.model_returned == "gpt-test-0613" and completion.system_fingerprint == "fp_44709d6fcb"
    assert completion.response_id == "chatcmpl-abc123" and completion.http_status == 200
    assert completion.cost == Decimal(120) * Decimal("2.5") / 10**6 + Decimal(14) * Decimal(10) / 10**6
    assert completion.request == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be kind."},
            {"role": "user", "content": "I failed my exam."},
        ],
        "temperature": 0.5,
        "max_tokens": 50,
        "seed": 3,
    }
    assert completion.raw_response["id"] == "chatcmpl-abc123"
    assert adapter_for(openai_provider).__class__ is OpenAICompatAdapter


def test_the_anthropic_adapter_reads_its_wire_format_into_a_typed_completion(httpserver, anthropic_provider):
    httpserver.expect_request("/v1/messages").respond_with_json(
        anthropic_body("I hear you.", stop="max_tokens")
    )
    completion = provider_complete(
        provider=anthropic_provider,
        model="claude-test",
        system="Be kind.",
        messages=[{"role": "user", "content": "Rough day."}],
        params={"temperature": 0.2, "max_tokens": 64, "seed": 9},
    )
    assert (completion.text, completion.finish_reason, completion.truncated) == (
        "I hear you.",
        "max_tokens",
        True,
    )
    assert (completion.usage_in, completion.usage_out, completion.response_id) == (110, 12, "msg_01abc")
    assert completion.model_returned == "claude-test-20250101" and completion.system_fingerprint == ""
    # The system prompt is a field of its own, and Anthropic has no seed: it is not sent.
    assert completion.request == {
        "model": "claude-test",
        "max_tokens": 64,
        "system": "Be kind.",
        "messages": [{"role": "user", "content": "Rough day."}],
        "temperature": 0.2,
    }
    assert adapter_for(anthropic_provider).__class__ is AnthropicAdapter


def test_each_adapter_refuses_the_other_wire_format_as_malformed():
    with pytest.raises(KeyError):
        AnthropicAdapter().reply_parse(openai_body())
    with pytest.raises(KeyError):
        OpenAICompatAdapter().reply_parse(anthropic_body())
    assert OpenAICompatAdapter().reply_parse(openai_body("x")) == Reply(
        text="x",
        finish_reason="stop",
        model_returned="gpt-test-0613",
        system_fingerprint="fp_44709d6fcb",
        response_id="chatcmpl-abc123",
        usage_in=120,
        usage_out=14,
    )


class ToyAdapter(ProviderAdapter):
    """A made-up wire format: POST {base}/generate {"model", "prompt", "limit"} → {"output", "why", "n_in", "n_out"}."""

    kind = "toy"
    label = "Toy wire format"

    def request_build(self, *, model, system, messages, params):
        prompt = "\n".join([system, *(m["content"] for m in messages)]).strip()
        return {"model": model, "prompt": prompt, "limit": params.get("max_tokens", 100)}

    def send(self, *, provider, api_key, body):
        request = urllib.request.Request(
            f"{provider.base_url}/generate",
            data=json.dumps(body).encode(),
            headers={"X-Toy-Key": api_key, "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=provider.timeout_seconds) as reply:
                return HTTPReply(status=reply.status, text=reply.read().decode(), headers=dict(reply.headers))
        except urllib.error.HTTPError as exc:
            raise status_error(exc.code, exc.read().decode(), exc.headers) from None

    def reply_parse(self, data):
        return Reply(
            text=data["output"], finish_reason=data["why"], usage_in=data["n_in"], usage_out=data["n_out"]
        )


@pytest.fixture
def toy_adapter():
    adapter = adapter_register(ToyAdapter())
    yield adapter
    adapter_unregister("toy")


def test_a_third_wire_format_is_one_class_and_one_registration(httpserver, api_key, toy_adapter):
    seen = []

    def toy_server(request):
        seen.append((request.headers.get("X-Toy-Key"), json.loads(request.get_data())))
        return json_response({"output": "Toy says: that is hard.", "why": "done", "n_in": 40, "n_out": 6})

    httpserver.expect_request("/toy/generate", method="POST").respond_with_handler(toy_server)
    provider = make_provider(httpserver, kind="openai", name="toy-box")
    provider.kind, provider.base_url = "toy", httpserver.url_for("/toy")
    provider.full_clean()  # the registration is also the admin's choice of kind
    provider.save(update_fields=["kind", "base_url"])
    study = make_study(provider=provider, n_prompts=2, system_prompt="Be warm.")
    conditions = generation_conditions(study=study)

    result = generation_start(study=study, conditions=conditions, dispatch=False)
    generation_run_in_process(item_ids=result.item_ids, threads=1)

    assert set(GenerationItem.objects.values_list("status", flat=True)) == {"done"}
    texts = set(Response.objects.filter(condition=conditions[0]).values_list("text", flat=True))
    assert texts == {"Toy says: that is hard."}
    assert len(seen) == 2 and all(key == api_key for key, _ in seen)
    assert seen[0][1]["prompt"].startswith("Be warm.\n") and seen[0][1]["limit"] == 120
    provenance = ResponseProvenance.objects.filter(provider_kind="toy")
    assert provenance.count() == 2
    row = provenance.first()
    assert row.request["model"] == "gpt-test" and row.raw_response["why"] == "done"
    assert (row.input_tokens, row.output_tokens, row.finish_reason) == (40, 6, "done")
    assert row.cost == Decimal(40) * Decimal("2.5") / 10**6 + Decimal(6) * Decimal(10) / 10**6
    # It has no Batch API, and says so; the other adapters are as they were.
    assert adapter_batch_api(provider) is None
    with pytest.raises(GenerationSetupError, match="has no Batch API here"):
        batches.batch_submit(study=study, conditions=conditions)
    assert isinstance(
        adapter_for(make_provider(httpserver, kind="openai", name="plain")), OpenAICompatAdapter
    )


def test_a_kind_no_adapter_speaks_fails_permanently_without_sending(httpserver, openai_provider):
    openai_provider.kind = "carrier-pigeon"
    with pytest.raises(PermanentProviderError, match="no adapter speaks"):
        provider_complete(provider=openai_provider, model="m", messages=[{"role": "user", "content": "hi"}])
    assert len(httpserver.log) == 0


def test_the_admin_offers_one_kind_per_registered_adapter(staff_client, toy_adapter):
    page = staff_client.get(reverse("admin:generation_provider_add")).content.decode()
    assert 'value="openai"' in page and 'value="anthropic"' in page and ">Toy wire format<" in page
