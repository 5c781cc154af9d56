"""A reply against a real loopback server speaking the OpenAI wire format: retried once after a 429, a 5xx, a
hang or a malformed body, then answered by the fallback; a connection lost mid-reply leaves the row pending and
the next request produces it; two requests for one pending reply produce it once; a lapsed lease (a process
killed mid-stream) is taken over; the minimum wait is honoured."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone
from werkzeug import Response as WerkzeugResponse

from generation.live_models import LiveCall
from generation.models import LLMConditionConfig, Provider
from generation.providers.placeholder import PlaceholderAdapter
from kinds.chat.models import ChatSettings, Conversation, Turn
from kinds.chat.replies import Chunk, Done, Failed, Reset, reply_events
from kinds.chat.turns import participant_turn_store
from studies.models import Condition
from tests.factories import ConditionFactory, ParticipantFactory, StudyFactory
from tests.generation.conftest import make_provider
from tests.generation.test_respond_now import PATH, WORDS, sse

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def chat(httpserver, api_key, monkeypatch):
    """A chat study whose source is the loopback model and whose fallback is the test model; one participant's
    conversation."""
    monkeypatch.setattr(PlaceholderAdapter, "word_seconds", 0.0)
    provider = make_provider(httpserver, kind="openai", timeout_seconds=0.5)
    study = StudyFactory(kind="chat")
    source = ConditionFactory(study=study, name="loop", kind=Condition.Kind.LLM)
    LLMConditionConfig.objects.create(condition=source, provider=provider, model="gpt-test", seed=11)
    fallback = ConditionFactory(study=study, name="fallback", kind=Condition.Kind.LLM, enrolling=False)
    test_model = Provider.objects.create(name="test-model", kind=PlaceholderAdapter.kind)
    LLMConditionConfig.objects.create(condition=fallback, provider=test_model, model="test-model")
    ChatSettings.objects.create(study=study, min_reply_wait_ms=0, fallback_condition=fallback, min_chars=1)
    participant = ParticipantFactory(study=study, condition=source)
    conversation = Conversation.objects.create(participant=participant, condition=source, label="ai")
    return conversation


def _send(conversation, text="My dog died last week."):
    return participant_turn_store(conversation, text)


def _fail(status: int):
    return lambda request: WerkzeugResponse(json.dumps({"error": {"message": "no"}}), status=status,
                                            content_type="application/json")  # fmt: skip


def _malformed(request):
    return WerkzeugResponse("data: {not json\n\ndata: [DONE]\n\n", mimetype="text/event-stream")


def _events(turn):
    return list(reply_events(turn))


@pytest.mark.parametrize("first", [_fail(429), _fail(503), _malformed], ids=["429", "503", "malformed"])
def test_a_failed_call_is_tried_once_more_and_the_reply_stored_once(httpserver, chat, first):
    httpserver.expect_ordered_request(PATH, method="POST").respond_with_handler(first)
    httpserver.expect_ordered_request(PATH, method="POST").respond_with_handler(sse())
    turn = _send(chat)
    events = _events(turn)
    assert isinstance(events[-1], Done)
    turn.refresh_from_db()
    assert (turn.status, turn.text, turn.attempts, turn.condition.name) == (
        "complete",
        "".join(WORDS),
        2,
        "loop",
    )
    assert (turn.input_tokens, turn.output_tokens, turn.finish_reason, turn.seed) == (20, 5, "stop", 11)
    assert (
        turn.live_call.outcome == LiveCall.Outcome.OK
        and turn.prompt["messages"][-1]["content"] == turn.conversation.turns.get(index=0).text
    )
    assert turn.error  # the failed attempt's error is kept with the reply
    assert LiveCall.objects.exclude(outcome=LiveCall.Outcome.OK).count() == 1
    chat.refresh_from_db()
    assert chat.state == Conversation.State.OPEN and not chat.fallback_used and chat.tokens_used == 25
    assert Turn.objects.filter(conversation=chat).count() == 2


def test_two_failures_go_to_the_fallback_and_the_participant_is_told_to_wait(httpserver, chat):
    httpserver.expect_request(PATH, method="POST").respond_with_handler(_fail(500))
    turn = _send(chat)
    events = _events(turn)
    assert any(getattr(e, "text", "").startswith("One moment") for e in events)
    assert isinstance(events[-1], Done)
    turn.refresh_from_db()
    assert turn.status == "complete" and turn.condition.name == "fallback" and turn.attempts == 3
    chat.refresh_from_db()
    assert chat.fallback_used and len(httpserver.log) == 2


def test_a_provider_that_hangs_times_out_twice_and_the_fallback_answers(httpserver, chat):
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse(pause=1.2, pause_after=0))
    turn = _send(chat)
    assert isinstance(_events(turn)[-1], Done)
    turn.refresh_from_db()
    assert turn.status == "complete" and turn.condition.name == "fallback" and turn.attempts == 3
    assert "timeout" in turn.error.lower() or "timed out" in turn.error.lower()
    assert LiveCall.objects.filter(condition__name="loop").exclude(outcome=LiveCall.Outcome.OK).count() == 2


def test_with_no_fallback_the_reply_stays_pending_and_a_later_request_produces_it(httpserver, chat):
    ChatSettings.objects.filter(study=chat.participant.study).update(fallback_condition=None)
    httpserver.expect_ordered_request(PATH, method="POST").respond_with_handler(_fail(500))
    httpserver.expect_ordered_request(PATH, method="POST").respond_with_handler(_fail(500))
    httpserver.expect_ordered_request(PATH, method="POST").respond_with_handler(sse())
    turn = _send(chat)
    assert isinstance(_events(turn)[-1], Failed)
    turn.refresh_from_db()
    assert turn.status == "pending" and turn.claimed_until is None and "500" in turn.error
    assert isinstance(_events(turn)[-1], Done)
    turn.refresh_from_db()
    assert turn.status == "complete" and turn.attempts == 3


def test_a_connection_lost_mid_reply_leaves_it_pending_and_the_next_request_resumes_it(httpserver, chat):
    httpserver.expect_ordered_request(PATH, method="POST").respond_with_handler(sse(pause=0.3, pause_after=2))
    httpserver.expect_ordered_request(PATH, method="POST").respond_with_handler(sse())
    turn = _send(chat)
    stream = reply_events(turn)
    first = next(e for e in stream if isinstance(e, Chunk))
    assert first.text == WORDS[0]
    stream.close()  # the participant's connection is gone
    turn.refresh_from_db()
    assert turn.status == "pending" and turn.claimed_until is None
    assert LiveCall.objects.get().outcome == LiveCall.Outcome.ABANDONED
    events = _events(turn)
    assert isinstance(events[-1], Done) and events[-1].turn.text == "".join(WORDS)
    assert Turn.objects.filter(conversation=chat, role="responder").count() == 1


def test_two_requests_for_one_pending_reply_produce_it_once(httpserver, chat):
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse(pause=0.3, pause_after=1))
    turn = _send(chat)
    results: list = []
    barrier = threading.Barrier(2)

    def resume():
        try:
            barrier.wait()
            results.append(_events(Turn.objects.get(pk=turn.pk)))
        finally:
            connection.close()

    threads = [threading.Thread(target=resume) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(events[-1], Done) for events in results)
    assert {events[-1].turn.text for events in results} == {"".join(WORDS)}
    assert len(httpserver.log) == 1 and LiveCall.objects.count() == 1
    assert Turn.objects.filter(conversation=chat, role="responder").count() == 1


def test_a_lapsed_lease_is_taken_over_and_the_old_holder_cannot_complete(httpserver, chat):
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse())
    turn = _send(chat)
    lapsed = timezone.now() - timedelta(seconds=1)
    Turn.objects.filter(pk=turn.pk).update(claimed_until=lapsed)  # its holder was killed mid-stream
    events = _events(turn)
    assert isinstance(events[-1], Done)
    turn.refresh_from_db()
    assert turn.status == "complete" and turn.claimed_until is None
    assert Turn.objects.filter(pk=turn.pk, claimed_until=lapsed, status="pending").update(text="x") == 0


def test_no_reply_is_shown_before_the_minimum_wait(httpserver, chat):
    ChatSettings.objects.filter(study=chat.participant.study).update(min_reply_wait_ms=700)
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse())
    turn = _send(chat)
    earliest = turn.sent_at + timedelta(milliseconds=700)
    for event in reply_events(turn):
        if isinstance(event, Chunk | Done):
            assert timezone.now() >= earliest
    assert not any(isinstance(e, Reset) for e in _events(turn))


def test_a_message_is_stored_while_another_transaction_holds_the_study_and_participant_rows(chat):
    """A message locks its conversation's row only: another message of the study (or anything else holding the
    study's or the participant's row) does not make it wait in line."""
    from studies.models import Participant, Study

    held, release = threading.Event(), threading.Event()

    def hold():
        try:
            with transaction.atomic():
                Study.objects.select_for_update().get(pk=chat.participant.study_id)
                Participant.objects.select_for_update().get(pk=chat.participant_id)
                held.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")  # a message that waits for those rows fails instead
        try:
            reply = _send(chat)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = 0")
    finally:
        release.set()
        holder.join()
    assert reply.status == "pending"
    assert Turn.objects.filter(conversation=chat).count() == 2


def test_a_message_while_a_reply_is_awaited_is_refused(httpserver, chat):
    from kinds.chat.turns import ConversationClosed

    _send(chat)
    with pytest.raises(ConversationClosed):
        _send(chat, "and another thing")
    assert Turn.objects.filter(conversation=chat).count() == 2


def test_a_holder_that_lost_its_lease_stores_nothing_and_shows_the_reply_that_was_stored(httpserver, chat):
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse(pause=0.2, pause_after=1))
    turn = _send(chat)
    stream = reply_events(turn)
    assert isinstance(next(e for e in stream if isinstance(e, Chunk)), Chunk)
    # Meanwhile its lease lapsed and another request took the row over and stored its reply.
    Turn.objects.filter(pk=turn.pk).update(claimed_until=timezone.now() + timedelta(minutes=1))
    Turn.objects.filter(pk=turn.pk).update(status="complete", text="The other request's reply.")
    rest = list(stream)
    assert any(isinstance(e, Reset) for e in rest)
    assert isinstance(rest[-1], Done) and rest[-1].turn.text == "The other request's reply."
    turn.refresh_from_db()
    assert turn.text == "The other request's reply." and turn.attempts == 1
    assert Turn.objects.filter(conversation=chat, role="responder").count() == 1


@pytest.fixture
def person_chat(chat):
    person = ConditionFactory(study=chat.participant.study, name="person", kind=Condition.Kind.HUMAN)
    Conversation.objects.filter(pk=chat.pk).update(condition=person)
    chat.refresh_from_db()
    return chat


def test_a_person_sources_reply_typed_at_the_console_is_shown_once(person_chat, django_user_model):
    from kinds.chat.turns import reply_complete

    responder = django_user_model.objects.create_user("responder", password="x", is_staff=True)
    turn = _send(person_chat)
    assert turn.condition.name == "person"

    def type_reply():
        try:
            import time

            time.sleep(0.4)
            reply_complete(
                Turn.objects.get(pk=turn.pk), text="I am so sorry. Tell me about him?", responder=responder
            )
        finally:
            connection.close()

    typist = threading.Thread(target=type_reply)
    typist.start()
    events = _events(turn)
    typist.join()
    assert isinstance(events[-1], Done) and events[-1].turn.text == "I am so sorry. Tell me about him?"
    turn.refresh_from_db()
    assert (turn.responder, turn.finish_reason, turn.live_call) == (responder, "person", None)
    assert reply_complete(turn, text="a second send") is None  # answered already: nothing changes
    turn.refresh_from_db()
    assert turn.text == "I am so sorry. Tell me about him?"


def test_a_person_who_does_not_answer_in_time_is_replaced_by_the_fallback(person_chat):
    ChatSettings.objects.filter(study=person_chat.participant.study).update(person_reply_seconds=1)
    turn = _send(person_chat)
    events = _events(turn)
    assert isinstance(events[-1], Done)
    turn.refresh_from_db()
    assert turn.condition.name == "fallback" and turn.live_call is not None
    person_chat.refresh_from_db()
    assert person_chat.fallback_used
