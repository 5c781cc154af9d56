"""The reply's stream under ASGI (kinds/chat/stream.py): the same lines as under WSGI, produced by an async
iterator (Django streams it chunk by chunk instead of reading it whole), the turns stored once, and a reader that
goes away mid-reply leaving the row pending for the next request, which answers it."""

from __future__ import annotations

import json

import pytest
from django.test import AsyncClient

from kinds.chat.models import Conversation, Turn
from tests.aio import run_async
from tests.ratings.helpers import enter, post_step, step_url

pytestmark = pytest.mark.django_db(transaction=True)
NDJSON = "application/x-ndjson"


def _opened(client, study, pid):
    enter(client, study, pid)
    post_step(client, study, decision="agree")
    post_step(client, study, step="chat_opening", opening="corpus")
    asgi = AsyncClient()
    asgi.cookies = client.cookies
    return asgi


def test_under_asgi_the_reply_streams_from_an_async_iterator(client, chat_demo):
    asgi = _opened(client, chat_demo, "ASGI1")

    async def main():
        response = await asgi.post(
            step_url(chat_demo),
            {"step": "chat_talk", "action": "send", "message": "I failed my exam today."},
            headers={"accept": NDJSON},
        )
        assert response.streaming and response.is_async
        return [json.loads(line) async for line in _lines(response)]

    lines = run_async(main())
    chunks = [line["chunk"] for line in lines if "chunk" in line]
    assert lines[0] == {"start": 1} and lines[-1]["done"] == 1
    assert len(chunks) > 3 and "".join(chunks) == lines[-1]["text"]
    conversation = Conversation.objects.get(participant__external_id="ASGI1")
    reply = conversation.turns.get(index=1)
    assert (reply.status, reply.text, reply.attempts) == (Turn.Status.COMPLETE, lines[-1]["text"], 1)
    assert reply.live_call_id and reply.shown_at and reply.safety["checks"] == ["crisis_terms"]
    assert conversation.state == Conversation.State.OPEN and conversation.turns.count() == 2


def test_a_reader_gone_mid_reply_leaves_it_pending_and_the_next_request_answers_it(client, chat_demo):
    asgi = _opened(client, chat_demo, "ASGI2")

    async def first_words_then_gone():
        response = await asgi.post(
            step_url(chat_demo),
            {"step": "chat_talk", "action": "send", "message": "My best friend moved away."},
            headers={"accept": NDJSON},
        )
        lines = _lines(response)
        got = [json.loads(await anext(lines)) for _ in range(2)]
        await response.streaming_content.aclose()  # the connection is lost
        return got

    got = run_async(first_words_then_gone())
    assert got[0] == {"start": 1} and "chunk" in got[1]
    reply = Turn.objects.get(conversation__participant__external_id="ASGI2", index=1)
    assert reply.status == Turn.Status.PENDING and reply.claimed_until is None  # the lease given back at once

    async def resume():
        response = await asgi.post(
            step_url(chat_demo), {"step": "chat_talk", "action": "resume"}, headers={"accept": NDJSON}
        )
        return [json.loads(line) async for line in _lines(response)]

    lines = run_async(resume())
    reply.refresh_from_db()
    assert lines[-1] == {"done": 1, "text": reply.text} and reply.status == Turn.Status.COMPLETE
    assert Turn.objects.filter(conversation=reply.conversation).count() == 2  # nothing doubled


async def _lines(response):
    buffer = b""
    async for part in response.streaming_content:
        buffer += part
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line.decode()
