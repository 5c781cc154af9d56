"""The crisis path over HTTP: a participant's message that names a crisis is stored, checked after its
transaction (so the moderation endpoint really runs), and shows the study's support resources before any reply is
asked for; the participant goes back to the conversation (the reply is produced then) or ends it and still gets
the rating, the debrief and the completion code. The researcher sees it in the export, the analysis page and the
admin. Two requests checking one message at once store and count it once."""

from __future__ import annotations

import csv
import io
import json

import pytest

from analysis.exports import export_lines
from generation.live_models import LiveCall
from kinds.chat.models import ChatSettings, Conversation, Turn
from kinds.chat.pets import KEYS
from kinds.chat.safety import participant_message_settle
from kinds.chat.turns import participant_turn_store
from studies.models import Participant
from tests.concurrency import race
from tests.generation.conftest import make_provider
from tests.kinds.chat.test_safety import _moderation
from tests.ratings.helpers import current_step, enter, post_step, step_url

pytestmark = pytest.mark.django_db(transaction=True)

CRISIS = "Honestly some days I think about ending my life."


def _talking(client, study, pid):
    enter(client, study, pid)
    post_step(client, study, decision="agree")
    post_step(client, study, step="chat_opening", opening="corpus")
    return Conversation.objects.get(participant__external_id=pid)


def _rate(client, study):
    data = {f"pets_{key}": "50" for key in KEYS}
    return post_step(client, study, step="chat_rate", scale="1", **data)


def test_a_crisis_message_shows_the_resources_and_ending_there_keeps_the_completion(
    client, admin_client, chat_demo
):
    ChatSettings.objects.filter(study=chat_demo).update(
        support_resources="Call the Test Line on 0800 000 000.\nhttps://findahelpline.com"
    )
    conversation = _talking(client, chat_demo, "CRISIS1")
    assert post_step(client, chat_demo, step="chat_talk", action="send", message=CRISIS).status_code == 302

    step, page = current_step(client, chat_demo)
    html = page.content.decode()
    assert step == "chat_talk" and "Where to find support now" in html
    assert "Call the Test Line on 0800 000 000." in html and 'href="https://findahelpline.com"' in html
    assert 'value="crisis_end"' in html and 'value="crisis_continue"' in html
    message = Turn.objects.get(conversation=conversation, role=Turn.Role.PARTICIPANT)
    assert (
        message.text == CRISIS and message.safety["crisis"] and message.safety["terms"] == ["ending my life"]
    )
    reply = Turn.objects.get(conversation=conversation, role=Turn.Role.RESPONDER)
    assert (reply.status, reply.attempts) == (
        "pending",
        0,
    ) and not LiveCall.objects.exists()  # no model asked

    # A resumed stream (a second tab) while the resources are open asks no model either: it sends the page back.
    resumed = client.post(step_url(chat_demo), {"step": "chat_talk", "action": "resume"},
                          HTTP_ACCEPT="application/x-ndjson")  # fmt: skip
    assert json.loads(resumed.content) == {"go": True} and not LiveCall.objects.exists()

    assert post_step(client, chat_demo, step="chat_talk", action="crisis_end").status_code == 302
    conversation.refresh_from_db()
    assert conversation.state == Conversation.State.ENDED_CRISIS and not conversation.crisis_open
    assert conversation.crisis_count == 1 and conversation.crisis_shown_at and conversation.ended_at
    assert list(conversation.turns.values_list("role", flat=True)) == [
        "participant"
    ]  # the held reply dropped

    step, _ = current_step(client, chat_demo)
    assert step == "chat_rate"
    assert _rate(client, chat_demo).status_code == 302
    assert post_step(client, chat_demo, step="chat_debrief").status_code == 302
    assert "CHAT-COMPLETE" in client.get(step_url(chat_demo)).content.decode()
    assert Participant.objects.get(external_id="CRISIS1").status == "completed"

    # The researcher: the conversations export, the analysis page's count, the admin.
    rows = list(csv.DictReader(io.StringIO("".join(export_lines(study=chat_demo, what="ratings")))))
    row = next(r for r in rows if r["participant"] == "CRISIS1")
    assert (row["state"], row["crisis_count"]) == ("ended_crisis", "1") and row["crisis_shown_at"]
    page = admin_client.get(f"/analysis/{chat_demo.slug}/chat/").content.decode()
    assert "1 conversation showed the support resources (1 message named a crisis)" in page
    assert "1 was ended there by the participant" in page
    listing = admin_client.get("/admin/chat/conversation/", {"state": "ended_crisis"}).content.decode()
    assert "Ended by the participant after the crisis resources" in listing


def test_going_back_to_the_conversation_produces_the_reply_then(client, chat_demo):
    conversation = _talking(client, chat_demo, "CRISIS2")
    post_step(client, chat_demo, step="chat_talk", action="send", message=CRISIS)
    assert post_step(client, chat_demo, step="chat_talk", action="crisis_continue").status_code == 302
    conversation.refresh_from_db()
    assert not conversation.crisis_open and conversation.crisis_count == 1
    step, page = current_step(client, chat_demo)
    assert step == "chat_talk" and "Show the reply" in page.content.decode()
    assert post_step(client, chat_demo, step="chat_talk", action="resume").status_code == 302
    reply = Turn.objects.get(conversation=conversation, role=Turn.Role.RESPONDER)
    assert reply.status == "complete" and reply.text and reply.safety["checks"] == ["crisis_terms"]
    # Ending from the resources is only for when they are shown.
    assert post_step(client, chat_demo, step="chat_talk", action="crisis_end").status_code == 400


def test_with_javascript_a_crisis_message_sends_the_page_to_the_resources_without_a_reply(client, chat_demo):
    conversation = _talking(client, chat_demo, "CRISIS3")
    response = client.post(step_url(chat_demo), {"step": "chat_talk", "action": "send", "message": CRISIS},
                           HTTP_ACCEPT="application/x-ndjson")  # fmt: skip
    assert json.loads(response.content) == {"go": True}
    assert not LiveCall.objects.exists() and Conversation.objects.get(pk=conversation.pk).crisis_open
    assert "Where to find support now" in client.get(step_url(chat_demo)).content.decode()


def test_the_moderation_endpoint_runs_on_the_stored_message_outside_its_transaction(
    client, chat_demo, httpserver, api_key
):
    provider = make_provider(httpserver, kind="openai")
    ChatSettings.objects.filter(study=chat_demo).update(moderation_provider=provider)
    httpserver.expect_request("/v1/moderations", method="POST").respond_with_handler(
        _moderation(True, {"self-harm": True, "harassment": False})
    )
    conversation = _talking(client, chat_demo, "CRISIS4")
    oblique = "I have been giving my things away lately."
    post_step(client, chat_demo, step="chat_talk", action="send", message=oblique)
    message = Turn.objects.get(conversation=conversation, role=Turn.Role.PARTICIPANT)
    assert message.safety["checks"] == ["crisis_terms", "moderation"] and message.safety["terms"] == []
    assert message.safety["moderation"]["categories"] == ["self-harm"] and message.safety["crisis"]
    assert Conversation.objects.get(pk=conversation.pk).crisis_open


def test_two_requests_checking_one_message_at_once_store_and_count_it_once(chat_demo):
    participant = Participant.objects.create(
        study=chat_demo, external_id="CRISIS5", condition=chat_demo.conditions.filter(enrolling=True).first()
    )
    conversation = Conversation.objects.create(participant=participant, condition=participant.condition,
                                               label="ai")  # fmt: skip
    reply = participant_turn_store(conversation, CRISIS)
    results, errors = race(lambda i: participant_message_settle(reply), 8)
    assert not errors and all(results.values())
    conversation.refresh_from_db()
    assert conversation.crisis_count == 1 and conversation.crisis_open


@pytest.mark.parametrize(
    ("text", "queries"),
    [
        # The message, whether the resources are open and the study's settings in one SELECT; the verdict in one
        # UPDATE.
        ("My exam went badly and I feel awful.", 2),
        # A crisis also opens the resources, in the verdict's transaction (BEGIN, the two UPDATEs, COMMIT), and
        # nothing is read after it.
        (CRISIS, 5),
    ],
)
def test_settling_a_message_before_its_reply_reads_once_and_writes_once(
    chat_demo, django_assert_num_queries, text, queries
):
    participant = Participant.objects.create(
        study=chat_demo, external_id="CRISIS6", condition=chat_demo.conditions.filter(enrolling=True).first()
    )
    conversation = Conversation.objects.create(participant=participant, condition=participant.condition,
                                               label="ai")  # fmt: skip
    participant_turn_store(conversation, text)
    reply = Turn.objects.get(conversation=conversation, role=Turn.Role.RESPONDER)  # nothing cached on it
    with django_assert_num_queries(queries):
        opened = participant_message_settle(reply)
    assert opened == (text == CRISIS)
    with django_assert_num_queries(1):  # checked already: its verdict and the resources in the one SELECT
        assert participant_message_settle(reply) == opened
    message = Turn.objects.get(conversation=conversation, role=Turn.Role.PARTICIPANT)
    assert message.safety["crisis"] == opened
    assert Conversation.objects.get(pk=conversation.pk).crisis_open == opened
