"""Respond now (generation/live.py) against a real loopback server speaking the OpenAI wire format: the reply
streamed chunk by chunk with its usage, cost and provenance stored in one autocommitted row, a timeout, a 429, a
5xx, the provider's limits, and nothing sent or written inside a transaction."""

from __future__ import annotations

import json
import time
from decimal import Decimal

import pytest
from django.db import connection, transaction
from werkzeug import Response as WerkzeugResponse

from generation.live import LiveCallInTransaction, respond_now
from generation.live_models import LiveCall
from generation.models import LLMConditionConfig
from generation.providers.base import LimiterWait, TransientProviderError
from studies.live import live_respond
from tests.generation.conftest import make_provider, make_study

pytestmark = pytest.mark.django_db(transaction=True)
PATH = "/v1/chat/completions"
WORDS = ["That ", "sounds ", "really ", "hard."]
ASKED = [{"role": "user", "content": "My dog died last week."}]


def sse(*, words=WORDS, pause: float = 0.0, pause_after: int = 1):
    """An OpenAI chat-completions stream: a chunk per word (pausing `pause` s after `pause_after` chunks), the
    finish reason, then the usage chunk, then [DONE]."""

    def events():
        base = {"id": "chatcmpl-live1", "object": "chat.completion.chunk", "created": 1,
                "model": "gpt-test-0613", "system_fingerprint": "fp_live"}  # fmt: skip
        for n, word in enumerate(words):
            if pause and n == pause_after:
                time.sleep(pause)
            delta = {"index": 0, "delta": {"content": word}, "finish_reason": None}
            yield f"data: {json.dumps({**base, 'choices': [delta]})}\n\n"
        done = {"index": 0, "delta": {}, "finish_reason": "stop"}
        yield f"data: {json.dumps({**base, 'choices': [done]})}\n\n"
        usage = {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
        yield f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n"
        yield "data: [DONE]\n\n"

    return lambda request: WerkzeugResponse(events(), mimetype="text/event-stream")


@pytest.fixture
def config(httpserver, api_key):
    provider = make_provider(httpserver, kind="openai")
    study = make_study(provider=provider, system_prompt="Be kind.")
    return LLMConditionConfig.objects.select_related("provider", "condition").get(condition__study=study)


def test_the_reply_streams_chunk_by_chunk_and_its_call_is_stored_once_outside_any_transaction(
    httpserver, config
):
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse())
    queries: list[tuple[str, bool]] = []

    def spy(execute, sql, params, many, context):
        queries.append((sql, connection.in_atomic_block))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(spy):
        reply = respond_now(config=config, messages=ASKED, context={"participant": 7, "turn": 1})
        chunks = list(reply)
    assert chunks == WORDS and reply.text == "That sounds really hard."
    assert (reply.finish_reason, reply.usage_in, reply.usage_out) == ("stop", 20, 5)
    assert reply.cost == Decimal("20") * Decimal("2.5") / 10**6 + Decimal("5") * Decimal("10") / 10**6
    sent = json.loads(httpserver.log[0][0].get_data())
    assert sent["stream"] is True and sent["messages"][0] == {"role": "system", "content": "Be kind."}
    assert (
        sent["temperature"] == 0.7
        and sent["seed"] == 11
        and sent["stream_options"] == {"include_usage": True}
    )
    call = LiveCall.objects.get()
    assert (
        call == reply.record
        and call.outcome == LiveCall.Outcome.OK
        and call.context == {"participant": 7, "turn": 1}
    )
    assert (call.model_returned, call.provider_response_id, call.finish_reason) == (
        "gpt-test-0613",
        "chatcmpl-live1",
        "stop",
    )
    assert (call.input_tokens, call.output_tokens, call.cost) == (20, 5, reply.cost)
    assert (
        call.request["model"] == "gpt-test" and call.text == reply.text and call.condition == config.condition
    )
    writes = [(sql, atomic) for sql, atomic in queries if not sql.lstrip().upper().startswith("SELECT")]
    assert len(writes) == 1 and "generation_livecall" in writes[0][0] and writes[0][1] is False
    assert not any(atomic for _sql, atomic in queries)


def test_inside_a_transaction_nothing_is_sent_and_nothing_written(httpserver, config):
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse())
    with transaction.atomic(), pytest.raises(LiveCallInTransaction):
        respond_now(config=config, messages=ASKED)
    reply = respond_now(config=config, messages=ASKED)
    with transaction.atomic(), pytest.raises(LiveCallInTransaction):
        next(iter(reply))  # read inside a transaction: refused before anything is sent
    assert httpserver.log == [] and not LiveCall.objects.exists()


def test_a_reply_too_slow_is_a_timeout_and_is_stored_with_what_came(httpserver, config):
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse(pause=1.5, pause_after=2))
    reply = respond_now(config=config, messages=ASKED, timeout=0.4)
    got = []
    with pytest.raises(TransientProviderError) as error:
        for chunk in reply:
            got.append(chunk)
    assert error.value.kind == "timeout" and got == WORDS[:2]
    call = LiveCall.objects.get()
    assert (call.outcome, call.error_kind, call.text) == (LiveCall.Outcome.ERROR, "timeout", "That sounds ")


@pytest.mark.parametrize(
    ("status", "kind", "retry_after"), [(429, "rate_limited", 7.0), (503, "server_error", None)]
)
def test_a_429_and_a_5xx_are_raised_classified_and_stored_unpaid(
    httpserver, config, status, kind, retry_after
):
    headers = {"retry-after": "7"} if retry_after else {}
    httpserver.expect_request(PATH, method="POST").respond_with_json(
        {"error": {"message": "slow down" if status == 429 else "overloaded"}}, status=status, headers=headers
    )
    with pytest.raises(TransientProviderError) as error:
        list(respond_now(config=config, messages=ASKED))
    assert (error.value.kind, error.value.http_status, error.value.retry_after) == (kind, status, retry_after)
    assert len(httpserver.log) == 1  # no retry while a person waits
    call = LiveCall.objects.get()
    assert (call.outcome, call.error_kind, call.http_status, call.retry_after, call.cost) == (
        LiveCall.Outcome.ERROR, kind, status, retry_after, 0,
    )  # fmt: skip


def test_the_providers_limits_hold_and_a_reader_who_stops_early_is_recorded(httpserver, config):
    config.provider.requests_per_minute = 1
    config.provider.save()
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse())
    reply = respond_now(config=config, messages=ASKED, max_wait=0.1)
    assert next(iter(reply)) == "That "
    reply.close()  # the page went away after the first words
    assert LiveCall.objects.get().outcome == LiveCall.Outcome.ABANDONED
    with pytest.raises(LimiterWait):  # one request a minute: the second is refused at once, nothing sent
        list(respond_now(config=config, messages=ASKED, max_wait=0.1))
    assert len(httpserver.log) == 1 and LiveCall.objects.count() == 1


def test_the_participant_path_reaches_it_through_the_spines_port(httpserver, config):
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse())
    reply = live_respond(condition=config.condition, messages=ASKED, context={"turn": 2})
    assert "".join(reply) == "That sounds really hard." and reply.record.context == {"turn": 2}


def anthropic_sse(request):
    """An Anthropic Messages stream: message_start (id, model, input tokens), two text deltas, message_delta
    (stop reason, output tokens), message_stop."""
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_live", "type": "message", "role": "assistant", "model": "claude-test", "content": [],
            "stop_reason": None, "usage": {"input_tokens": 30, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        *[("content_block_delta", {"type": "content_block_delta", "index": 0,
                                   "delta": {"type": "text_delta", "text": word}}) for word in WORDS[:2]],
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 4}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    text = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    return WerkzeugResponse(text, mimetype="text/event-stream")


def test_an_anthropic_reply_streams_too(httpserver, api_key):
    provider = make_provider(httpserver, kind="anthropic")
    study = make_study(provider=provider)
    config = LLMConditionConfig.objects.select_related("provider").get(condition__study=study)
    httpserver.expect_request("/v1/messages", method="POST").respond_with_handler(anthropic_sse)
    reply = respond_now(config=config, messages=ASKED)
    assert list(reply) == WORDS[:2] and (reply.finish_reason, reply.usage_in, reply.usage_out) == (
        "end_turn",
        30,
        4,
    )
    call = LiveCall.objects.get()
    assert (call.outcome, call.provider_response_id, call.model_returned) == (
        LiveCall.Outcome.OK,
        "msg_live",
        "claude-test",
    )
    assert json.loads(httpserver.log[0][0].get_data())["stream"] is True
