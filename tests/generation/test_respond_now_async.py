"""Respond now for an async view (generation/live.py's respond_now_async) against a real loopback server: the same
stored row, usage and cost as the sync call, a reader who goes away mid-reply recorded as abandoned, an Anthropic
stream, the study's budget held while the call runs, and many replies read at once by one event loop."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal

import pytest

from generation.budget import StudyBudget
from generation.live import respond_now_async
from generation.live_models import LiveCall
from generation.models import LLMConditionConfig
from generation.providers.base import TransientProviderError
from studies.live import live_respond_async
from tests.aio import run_async
from tests.generation.conftest import make_provider, make_study
from tests.generation.test_respond_now import ASKED, PATH, WORDS, anthropic_sse, sse

pytestmark = pytest.mark.django_db(transaction=True)


def _config(server, kind="openai"):
    provider = make_provider(server, kind=kind, max_concurrency=100)
    study = make_study(provider=provider, system_prompt="Be kind.")
    return LLMConditionConfig.objects.select_related("provider", "condition").get(condition__study=study)


async def _read(reply, stop_after: int | None = None) -> list[str]:
    got = []
    async for chunk in reply:
        got.append(chunk)
        if stop_after is not None and len(got) == stop_after:
            await reply.aclose()
            break
    return got


def test_the_async_reply_streams_and_is_stored_like_the_sync_one(httpserver, api_key):
    config = _config(httpserver)
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse())

    async def main():
        reply = await respond_now_async(config=config, messages=ASKED, context={"participant": 3, "turn": 1})
        return reply, await _read(reply)

    reply, chunks = run_async(main())
    assert chunks == WORDS and reply.text == "That sounds really hard."
    assert (reply.finish_reason, reply.usage_in, reply.usage_out) == ("stop", 20, 5)
    assert reply.cost == Decimal("20") * Decimal("2.5") / 10**6 + Decimal("5") * Decimal("10") / 10**6
    sent = json.loads(httpserver.log[0][0].get_data())
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True} and sent["seed"] == 11
    call = LiveCall.objects.get()
    assert (call.outcome, call.context, call.text, call.cost, call.provider_response_id) == (
        LiveCall.Outcome.OK, {"participant": 3, "turn": 1}, reply.text, reply.cost, "chatcmpl-live1",
    )  # fmt: skip
    assert call.first_chunk_ms is not None and call.pk == reply.record.pk


def test_a_reader_who_goes_away_is_recorded_as_abandoned_and_its_reservation_kept_as_spent(
    httpserver, api_key
):
    config = _config(httpserver)
    budget = StudyBudget.objects.create(study=config.condition.study, cap=Decimal("1"))
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse(pause=0.5, pause_after=1))

    async def main():
        reply = await respond_now_async(config=config, messages=ASKED, context={"participant": 3})
        return await _read(reply, stop_after=1)

    assert run_async(main()) == ["That "]
    assert LiveCall.objects.get().outcome == LiveCall.Outcome.ABANDONED
    budget.refresh_from_db()
    held = budget.reservations.get()
    # the usage never came: the call's maximum is what it may have cost
    assert (budget.reserved, budget.spent, held.state) == (0, held.max_cost, "settled") and held.max_cost > 0


def test_a_timeout_is_raised_classified_and_stored(httpserver, api_key):
    config = _config(httpserver)
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse(pause=1.5, pause_after=2))

    async def main():
        reply = await respond_now_async(config=config, messages=ASKED, timeout=0.4)
        got = []
        with pytest.raises(TransientProviderError) as error:
            async for chunk in reply:
                got.append(chunk)
        return got, error.value.kind

    assert run_async(main()) == (WORDS[:2], "timeout")
    call = LiveCall.objects.get()
    assert (call.outcome, call.error_kind, call.text) == (LiveCall.Outcome.ERROR, "timeout", "That sounds ")


def test_an_anthropic_reply_streams_async_through_the_spines_port(httpserver, api_key):
    config = _config(httpserver, kind="anthropic")
    httpserver.expect_request("/v1/messages", method="POST").respond_with_handler(anthropic_sse)

    async def main():
        reply = await live_respond_async(condition=config.condition, messages=ASKED, context={"turn": 2})
        return reply, await _read(reply)

    reply, chunks = run_async(main())
    assert chunks == WORDS[:2] and (reply.finish_reason, reply.usage_in, reply.usage_out) == (
        "end_turn",
        30,
        4,
    )
    assert reply.record.context == {"turn": 2} and reply.record.provider_response_id == "msg_live"


def test_one_event_loop_reads_many_slow_replies_at_once(threaded_server, api_key):
    """Twenty replies each pausing 1 s after their first word, read by one thread's event loop: they overlap
    (all twenty first words arrive before any reply ends), so a conversation does not need a worker of its own."""
    config = _config(threaded_server)
    threaded_server.expect_request(PATH, method="POST").respond_with_handler(sse(pause=1.0, pause_after=1))
    events: list[tuple[str, int]] = []

    async def one(n):
        reply = await respond_now_async(config=config, messages=ASKED, context={"participant": n})
        async for chunk in reply:
            if chunk == WORDS[0]:
                events.append(("first", n))
        events.append(("end", n))

    async def main():
        await asyncio.gather(*(one(n) for n in range(20)))

    run_async(main())
    kinds = [kind for kind, _n in events]
    assert kinds[:20] == ["first"] * 20 and kinds[20:] == ["end"] * 20, kinds
    assert LiveCall.objects.filter(outcome=LiveCall.Outcome.OK).count() == 20
