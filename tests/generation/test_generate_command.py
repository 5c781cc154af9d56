"""`generate_responses` against loopback providers: retries, permanent failures, exactly-once storage, provenance."""

import json
import time
from io import StringIO

import pytest
from django.core import serializers
from django.core.management import CommandError, call_command
from werkzeug import Response as WResponse

from generation.models import GenerationAttempt, GenerationItem, LLMConditionConfig, ResponseProvenance
from studies.models import Response

from .conftest import TEST_KEY, anthropic_body, json_response, make_provider, make_study, openai_body

# --threads 1: the command works in the test's own thread and connection (concurrency is tested elsewhere).
pytestmark = pytest.mark.django_db

CHAT = "/v1/chat/completions"


def run(*args):
    out = StringIO()
    call_command("generate_responses", *args, "--in-process", "--threads", "1", "--no-progress", stdout=out)
    return out.getvalue()


def test_it_stores_one_response_per_prompt_and_sample_with_full_provenance(httpserver, openai_provider):
    study = make_study(provider=openai_provider, n_prompts=3, n_samples=2)
    httpserver.expect_request(CHAT).respond_with_json(
        openai_body("I'm so sorry. Losing him must hurt a lot.")
    )

    output = run(study.slug)

    responses = Response.objects.filter(condition__name="gpt")
    assert sorted(responses.values_list("prompt__dialogue_id", "sample_index")) == sorted(
        (p.dialogue_id, s) for p in study.prompts.all() for s in (0, 1)
    )
    assert set(responses.values_list("source", flat=True)) == {Response.Source.GENERATED}
    assert len(httpserver.log) == 6
    provenance = ResponseProvenance.objects.get(response=responses.first())
    sent = [json.loads(request.get_data()) for request, _ in httpserver.log]
    assert provenance.request in sent
    assert provenance.request["temperature"] == 0.7 and provenance.request["seed"] == 11
    assert "My dog passed away" in provenance.request["messages"][-1]["content"]
    assert provenance.raw_response["system_fingerprint"] == "fp_44709d6fcb"
    assert (provenance.model_returned, provenance.system_fingerprint) == ("gpt-test-0613", "fp_44709d6fcb")
    assert (provenance.input_tokens, provenance.output_tokens, provenance.attempts) == (120, 14, 1)
    assert provenance.cost > 0 and provenance.latency_ms >= 0
    assert provenance.requested_at <= provenance.completed_at
    assert "gpt: 6/6 done, 0 failed" in output
    assert "human (baseline): n=3" in output


def test_transient_errors_are_retried_with_backoff_and_retry_after_is_honoured(
    threaded_server, api_key, fast_retries
):
    # A threaded server, so the request after the hang is not queued behind it.
    httpserver = threaded_server
    provider = make_provider(httpserver, timeout_seconds=0.3, max_attempts=6)
    study = make_study(provider=provider, n_prompts=1)

    def hang(request):
        time.sleep(0.8)
        return json_response(openai_body())

    times = []

    def stamp(response):
        def handler(request):
            times.append(time.monotonic())
            return response if isinstance(response, WResponse) else response(request)

        return handler

    rate_limited = json_response(
        {"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "1"}
    )
    httpserver.expect_ordered_request(CHAT).respond_with_handler(stamp(rate_limited))
    httpserver.expect_ordered_request(CHAT).respond_with_handler(
        stamp(json_response({"error": {"message": "boom"}}, status=500))
    )
    httpserver.expect_ordered_request(CHAT).respond_with_handler(stamp(hang))
    httpserver.expect_ordered_request(CHAT).respond_with_handler(stamp(lambda request: _raw("{broken")))
    httpserver.expect_ordered_request(CHAT).respond_with_handler(
        stamp(json_response(openai_body("Finally here.")))
    )

    run(study.slug)

    assert len(times) == 5
    assert times[1] - times[0] >= 1.0  # the 429's Retry-After: 1 was waited out
    item = GenerationItem.objects.get(condition__name="gpt")
    assert item.status == GenerationItem.Status.DONE and item.attempts == 5
    kinds = list(item.attempt_log.order_by("number").values_list("outcome", "error_kind"))
    assert kinds == [
        ("transient", "rate_limited"),
        ("transient", "server_error"),
        ("transient", "timeout"),
        ("transient", "malformed"),
        ("stored", ""),
    ]
    assert Response.objects.get(condition__name="gpt").text == "Finally here."
    assert ResponseProvenance.objects.get().attempts == 5


def _raw(body):
    return WResponse(body, status=200, content_type="application/json")


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (401, "Incorrect API key provided", "bad_key"),
        (404, "The model `gpt-test` does not exist", "model_not_found"),
        (400, "maximum context length is 4096 tokens", "context_too_long"),
    ],
)
def test_permanent_errors_fail_at_once_with_the_reason_shown(
    httpserver, openai_provider, fast_retries, status, message, expected
):
    study = make_study(provider=openai_provider, n_prompts=2)
    httpserver.expect_request(CHAT).respond_with_json({"error": {"message": message}}, status=status)

    output = run(study.slug)

    assert len(httpserver.log) == 2  # one call per item, no retry
    items = GenerationItem.objects.filter(condition__name="gpt")
    assert set(items.values_list("status", "error_kind", "attempts")) == {("failed", expected, 1)}
    assert message in items.first().last_error
    assert not Response.objects.filter(condition__name="gpt").exists()
    assert "2 failed" in output and message in output


def test_retry_failed_recovers_without_duplicates_once_the_provider_works(
    httpserver, openai_provider, fast_retries
):
    study = make_study(provider=openai_provider, n_prompts=2)
    httpserver.expect_oneshot_request(CHAT).respond_with_json({"error": {"message": "bad key"}}, status=401)
    httpserver.expect_request(CHAT).respond_with_json(openai_body("Hello there."))
    run(study.slug)
    assert GenerationItem.objects.filter(status="failed").count() == 1
    assert Response.objects.filter(condition__name="gpt").count() == 1

    out = StringIO()
    call_command(
        "generate_responses",
        study.slug,
        "--retry-failed",
        "--in-process",
        "--threads",
        "1",
        "--no-progress",
        stdout=out,
    )
    run(study.slug)  # starting again afterwards changes nothing

    assert "Retrying 1 failed items" in out.getvalue()
    assert Response.objects.filter(condition__name="gpt").count() == 2
    assert len(httpserver.log) == 3
    assert set(GenerationItem.objects.values_list("status", flat=True)) == {"done"}


def test_transient_errors_give_up_after_max_attempts_and_say_so(httpserver, openai_provider, fast_retries):
    openai_provider.max_attempts = 3
    openai_provider.save()
    study = make_study(provider=openai_provider, n_prompts=1)
    httpserver.expect_request(CHAT).respond_with_json(openai_body(""))  # empty reply, every time

    output = run(study.slug)

    assert len(httpserver.log) == 3
    item = GenerationItem.objects.get(condition__name="gpt")
    assert item.status == "failed" and item.error_kind == "empty"
    assert "gave up after 3 attempts" in item.last_error and "gave up after 3 attempts" in output
    assert not Response.objects.filter(condition__name="gpt").exists()


def test_anthropic_conditions_generate_through_the_messages_api(httpserver, anthropic_provider):
    study = make_study(provider=anthropic_provider, n_prompts=2)
    httpserver.expect_request("/v1/messages").respond_with_json(anthropic_body("I'm so sorry, that is hard."))
    run(study.slug)
    assert Response.objects.filter(condition__name="gpt").count() == 2
    provenance = ResponseProvenance.objects.first()
    assert provenance.provider_kind == "anthropic" and provenance.model_returned == "claude-test-20250101"
    assert provenance.request["_seed_not_sent"] == 11 and "seed" not in json.loads(
        httpserver.log[0][0].get_data()
    )


def test_starting_twice_sends_and_stores_nothing_the_second_time(httpserver, openai_provider):
    study = make_study(provider=openai_provider, n_prompts=3)
    httpserver.expect_request(CHAT).respond_with_json(openai_body())
    run(study.slug)
    run(study.slug)
    assert len(httpserver.log) == 3
    assert Response.objects.filter(condition__name="gpt").count() == 3


def test_quality_gates_flag_truncated_and_model_revealing_responses(httpserver, openai_provider):
    study = make_study(provider=openai_provider, n_prompts=3)
    httpserver.expect_ordered_request(CHAT).respond_with_json(
        openai_body("That sounds so hard and I", finish="length")
    )
    httpserver.expect_ordered_request(CHAT).respond_with_json(
        openai_body("As an AI language model, I don't have feelings, but that sounds hard.")
    )
    httpserver.expect_ordered_request(CHAT).respond_with_json(openai_body("I'm so sorry about your dog."))
    call_command(
        "generate_responses", study.slug, "--in-process", "--no-progress", "--threads", "1", stdout=StringIO()
    )
    flags = sorted((r.review, tuple(r.review_flags)) for r in Response.objects.filter(condition__name="gpt"))
    assert flags == [("flagged", ("reveals_model",)), ("flagged", ("truncated",)), ("ok", ())]


def test_an_unknown_placeholder_is_refused_before_anything_is_written(httpserver, openai_provider):
    study = make_study(provider=openai_provider, n_prompts=2)
    LLMConditionConfig.objects.update(prompt_template="Reply to {speaker_utterance} feeling {mood}.")
    with pytest.raises(
        CommandError, match=r"gpt: prompt template: Unknown placeholder\(s\) in the template: \{mood\}"
    ):
        run(study.slug)
    assert not GenerationItem.objects.exists()
    assert len(httpserver.log) == 0


def test_an_unset_key_variable_is_named_and_nothing_is_written(httpserver, openai_provider, monkeypatch):
    study = make_study(provider=openai_provider, n_prompts=2)
    monkeypatch.delenv("TEST_GEN_API_KEY")
    with pytest.raises(CommandError, match="environment variable TEST_GEN_API_KEY .* is not set"):
        run(study.slug)
    assert not GenerationItem.objects.exists()


def test_dry_run_shows_the_estimate_and_a_rendered_example_and_sends_nothing(httpserver, openai_provider):
    study = make_study(provider=openai_provider, n_prompts=4)
    out = StringIO()
    call_command("generate_responses", study.slug, "--dry-run", stdout=out)
    text = out.getvalue()
    assert "gpt: 4 calls to loop-openai/gpt-test" in text
    assert "≤ $0.00" in text and "Dry run: nothing was sent." in text
    first = study.prompts.order_by("id").first()
    assert f"Situation: {first.situation}" in text and "28 words" in text
    assert len(httpserver.log) == 0 and not GenerationItem.objects.exists()


def test_an_unknown_condition_lists_the_real_ones(openai_provider):
    study = make_study(provider=openai_provider, conditions=("gpt4", "llama"))
    with pytest.raises(CommandError, match="no LLM condition named 'claude'.*gpt4, llama"):
        run(study.slug, "--condition", "claude")


def test_cancel_then_start_resumes_only_the_cancelled_items(httpserver, openai_provider):
    study = make_study(provider=openai_provider, n_prompts=3, conditions=("gpt", "other"))
    httpserver.expect_request(CHAT).respond_with_json(openai_body())
    run(study.slug, "--condition", "gpt")
    from generation.services.dispatch import generation_start

    generation_start(study=study, conditions=list(study.conditions.filter(name="other")), dispatch=False)
    out = StringIO()
    call_command("generate_responses", study.slug, "--condition", "other", "--cancel", stdout=out)
    assert "Cancelled 3 pending items" in out.getvalue()
    assert set(GenerationItem.objects.filter(condition__name="other").values_list("status", flat=True)) == {
        "cancelled"
    }
    run(study.slug)
    assert Response.objects.filter(condition__kind="llm").count() == 6
    assert len(httpserver.log) == 6


def test_the_key_never_reaches_the_database_the_logs_or_the_export(
    httpserver, openai_provider, fast_retries, caplog, tmp_path
):
    caplog.set_level("DEBUG")
    study = make_study(provider=openai_provider, n_prompts=3)
    httpserver.expect_ordered_request(CHAT).respond_with_json(
        {"error": {"message": "Incorrect API key provided: sk-test-****cdef"}}, status=401
    )
    httpserver.expect_ordered_request(CHAT).respond_with_json({"error": {"message": "oops"}}, status=500)
    httpserver.expect_request(CHAT).respond_with_json(openai_body())
    call_command(
        "generate_responses", study.slug, "--in-process", "--no-progress", "--threads", "1", stdout=StringIO()
    )
    export = tmp_path / "provenance.csv"
    call_command("generate_responses", study.slug, "--export-provenance", str(export), stdout=StringIO())

    stored = serializers.serialize(
        "json",
        [
            *GenerationItem.objects.all(),
            *GenerationAttempt.objects.all(),
            *ResponseProvenance.objects.all(),
            *openai_provider.__class__.objects.all(),
        ],
    )
    assert GenerationAttempt.objects.count() >= 3
    assert TEST_KEY not in stored
    assert TEST_KEY not in caplog.text
    assert TEST_KEY not in export.read_text()
    assert "TEST_GEN_API_KEY" in stored  # the variable's name is what is stored


def test_export_has_one_row_per_response_with_the_provenance_columns(httpserver, openai_provider, tmp_path):
    study = make_study(provider=openai_provider, n_prompts=2)
    httpserver.expect_request(CHAT).respond_with_json(openai_body())
    run(study.slug)
    path = tmp_path / "p.jsonl"
    call_command("generate_responses", study.slug, "--export-provenance", str(path), stdout=StringIO())
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 2
    assert {r["model_returned"] for r in rows} == {"gpt-test-0613"}
    assert json.loads(rows[0]["request_json"])["model"] == "gpt-test"
    assert rows[0]["input_tokens"] == 120 and float(rows[0]["cost_usd"]) > 0
