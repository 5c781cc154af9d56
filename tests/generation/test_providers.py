"""provider_complete against a loopback server speaking each wire format: results and error classification."""

import threading
from decimal import Decimal

import pytest

from generation.providers import PermanentProviderError, TransientProviderError, provider_complete

from .conftest import anthropic_body, json_response, openai_body

pytestmark = pytest.mark.django_db

MESSAGES = [{"role": "user", "content": "My dog died. I miss him."}]


def test_it_returns_text_usage_cost_and_the_exact_request_from_an_openai_compatible_endpoint(
    httpserver, openai_provider
):
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_json(
        openai_body("So sorry.")
    )
    completion = provider_complete(
        provider=openai_provider,
        model="gpt-test",
        system="Be kind.",
        messages=MESSAGES,
        params={"temperature": 0.7, "max_tokens": 50, "seed": 3, "top_p": None},
    )
    assert completion.text == "So sorry."
    assert completion.finish_reason == "stop" and not completion.truncated
    assert completion.model_returned == "gpt-test-0613"
    assert completion.system_fingerprint == "fp_44709d6fcb"
    assert (completion.usage_in, completion.usage_out) == (120, 14)
    assert (
        completion.cost
        == Decimal("120") * Decimal("2.5") / 1_000_000 + Decimal("14") * Decimal("10") / 1_000_000
    )
    sent = httpserver.log[0][0].get_json()
    assert sent == completion.request
    assert sent == {
        "model": "gpt-test",
        "messages": [{"role": "system", "content": "Be kind."}, MESSAGES[0]],
        "temperature": 0.7,
        "max_tokens": 50,
        "seed": 3,
    }
    assert httpserver.log[0][0].headers["Authorization"] == "Bearer sk-test-SECRET-0123456789abcdef"


def test_it_speaks_anthropics_messages_format(httpserver, anthropic_provider):
    httpserver.expect_request("/v1/messages", method="POST").respond_with_json(
        anthropic_body(stop="max_tokens")
    )
    completion = provider_complete(
        provider=anthropic_provider,
        model="claude-test",
        system="Be kind.",
        messages=MESSAGES,
        params={"temperature": 0.5, "max_tokens": 40, "seed": 9},
    )
    assert completion.text.startswith("That sounds exhausting")
    assert completion.truncated
    assert completion.model_returned == "claude-test-20250101"
    assert (completion.usage_in, completion.usage_out) == (110, 12)
    sent = httpserver.log[0][0].get_json()
    assert sent == {
        "model": "claude-test",
        "max_tokens": 40,
        "system": "Be kind.",
        "messages": MESSAGES,
        "temperature": 0.5,
    }
    headers = httpserver.log[0][0].headers
    assert "sk-test-SECRET-0123456789abcdef" in headers.get("x-api-key", "") + headers.get(
        "Authorization", ""
    )


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (
            400,
            {"error": {"message": "Invalid value for temperature", "type": "invalid_request_error"}},
            "bad_request",
        ),
        (401, {"error": {"message": "Incorrect API key provided"}}, "bad_key"),
        (403, {"error": {"message": "forbidden"}}, "bad_key"),
        (
            404,
            {"error": {"message": "The model `nope` does not exist", "code": "model_not_found"}},
            "model_not_found",
        ),
        (
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 8192 tokens",
                    "code": "context_length_exceeded",
                }
            },
            "context_too_long",
        ),
        (
            400,
            {"error": {"message": "flagged by our content_filter", "code": "content_filter"}},
            "content_filter",
        ),
        (
            429,
            {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}},
            "quota",
        ),
    ],
)
def test_permanent_errors_are_classified_permanent(httpserver, openai_provider, status, body, kind):
    httpserver.expect_request("/v1/chat/completions").respond_with_json(body, status=status)
    with pytest.raises(PermanentProviderError) as caught:
        provider_complete(provider=openai_provider, model="nope", messages=MESSAGES)
    assert caught.value.kind == kind
    assert caught.value.http_status == status
    assert len(httpserver.log) == 1  # the SDK's own retries are off


def test_a_429_is_transient_and_carries_retry_after(httpserver, openai_provider):
    httpserver.expect_request("/v1/chat/completions").respond_with_response(
        json_response({"error": {"message": "Rate limit reached"}}, status=429, headers={"Retry-After": "7"})
    )
    with pytest.raises(TransientProviderError) as caught:
        provider_complete(provider=openai_provider, model="m", messages=MESSAGES)
    assert (caught.value.kind, caught.value.retry_after) == ("rate_limited", 7.0)


def test_anthropic_overloaded_529_is_transient(httpserver, anthropic_provider):
    httpserver.expect_request("/v1/messages").respond_with_json(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, status=529
    )
    with pytest.raises(TransientProviderError) as caught:
        provider_complete(
            provider=anthropic_provider, model="m", messages=MESSAGES, params={"max_tokens": 10}
        )
    assert caught.value.kind == "server_error"


def test_malformed_and_empty_bodies_are_transient(httpserver, openai_provider):
    httpserver.expect_ordered_request("/v1/chat/completions").respond_with_data(
        "{not json", content_type="application/json"
    )
    httpserver.expect_ordered_request("/v1/chat/completions").respond_with_json({"choices": []})
    httpserver.expect_ordered_request("/v1/chat/completions").respond_with_json(openai_body("   "))
    kinds = []
    for _ in range(3):
        with pytest.raises(TransientProviderError) as caught:
            provider_complete(provider=openai_provider, model="m", messages=MESSAGES)
        kinds.append(caught.value.kind)
    assert kinds == ["malformed", "malformed", "empty"]


def test_a_hang_past_the_timeout_is_a_transient_timeout(httpserver, openai_provider):
    """The server answers only once the caller has given up: the call must end on its own timeout, whatever
    the machine's load (no wall-clock bound: the server cannot answer before the caller has failed)."""
    openai_provider.timeout_seconds = 0.2
    openai_provider.save()
    gave_up = threading.Event()

    def hang(request):
        gave_up.wait(timeout=60)
        return json_response(openai_body())

    httpserver.expect_request("/v1/chat/completions").respond_with_handler(hang)
    try:
        with pytest.raises(TransientProviderError) as caught:
            provider_complete(provider=openai_provider, model="m", messages=MESSAGES)
    finally:
        gave_up.set()
    assert caught.value.kind == "timeout"


def test_an_unset_key_variable_is_a_permanent_error_that_names_the_variable(
    httpserver, openai_provider, monkeypatch
):
    monkeypatch.delenv("TEST_GEN_API_KEY")
    with pytest.raises(PermanentProviderError, match="TEST_GEN_API_KEY") as caught:
        provider_complete(provider=openai_provider, model="m", messages=MESSAGES)
    assert caught.value.kind == "missing_key"
    assert len(httpserver.log) == 0


def test_a_content_filter_finish_is_permanent(httpserver, openai_provider):
    httpserver.expect_request("/v1/chat/completions").respond_with_json(
        openai_body("", finish="content_filter")
    )
    with pytest.raises(PermanentProviderError) as caught:
        provider_complete(provider=openai_provider, model="m", messages=MESSAGES)
    assert caught.value.kind == "content_filter"
