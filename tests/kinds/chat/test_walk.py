"""A participant of chat-demo over HTTP without JavaScript: consent, the opening, a conversation whose turns are
each stored before they are shown, the rating (PETS and the scale), the debrief, the completion code."""

import json
from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from kinds.chat.demo import MODEL_SOURCE, PERSON, PERSON_REPLY_SECONDS, chat_demo_create
from kinds.chat.models import ChatRating, Conversation, Turn
from kinds.chat.pets import KEYS
from studies.demo.seed import ADMIN_USERNAME, demo_seed
from studies.models import Participant
from tests.ratings.helpers import current_step, enter, post_step, step_url

pytestmark = pytest.mark.django_db(transaction=True)


def _rate(client, study):
    data = {f"pets_{key}": str(10 * i) for i, key in enumerate(KEYS)}
    return post_step(client, study, step="chat_rate", scale="2", free_text="Kind replies.", **data)


def test_a_participant_talks_rates_reads_the_debrief_and_gets_the_code(client, chat_demo):
    enter(client, chat_demo, "CHAT1")
    assert post_step(client, chat_demo, decision="agree").status_code == 302
    step, page = current_step(client, chat_demo)
    assert step == "chat_opening"
    assert "Start the conversation about it" in page.content.decode()
    assert post_step(client, chat_demo, step="chat_opening", opening="corpus").status_code == 302
    step, page = current_step(client, chat_demo)
    assert step == "chat_talk"
    html = page.content.decode()
    assert "Finish the conversation" in html
    conversation = Conversation.objects.get(participant__external_id="CHAT1")
    assert conversation.opening_source == "corpus" and conversation.opening_text

    for n, text in enumerate(["My dog died last week.", "I keep looking for him at the door."]):
        response = post_step(client, chat_demo, step="chat_talk", action="send", message=text)
        assert response.status_code == 302
        turns = list(conversation.turns.order_by("index"))
        assert [t.role for t in turns] == ["participant", "responder"] * (n + 1)
        reply = turns[-1]
        assert reply.status == "complete" and reply.text and reply.live_call_id
        assert reply.prompt["messages"][-1] == {"role": "user", "content": text}
        assert reply.input_tokens and reply.output_tokens and reply.finish_reason == "stop"
        assert reply.sent_at <= reply.first_token_at <= reply.completed_at
        html = client.get(step_url(chat_demo)).content.decode()
        assert reply.text.split()[0] in html
    assert Turn.objects.filter(conversation=conversation, shown_at__isnull=True).count() == 2  # participant's

    assert post_step(client, chat_demo, step="chat_talk", action="finish").status_code == 302
    step, page = current_step(client, chat_demo)
    assert step == "chat_rate"
    assert page.content.decode().count('type="range"') == 10
    assert _rate(client, chat_demo).status_code == 302
    rating = ChatRating.objects.get(conversation=conversation)
    assert rating.scale_value == 2 and rating.free_text == "Kind replies."
    assert rating.pets_er == pytest.approx(sum(10 * i for i in range(6)) / 6)
    assert rating.pets_ut == pytest.approx(sum(10 * i for i in range(6, 10)) / 4)
    assert sorted(rating.pets_order) == sorted(KEYS)

    step, page = current_step(client, chat_demo)
    assert step == "chat_debrief" and "not always true" in page.content.decode()
    assert post_step(client, chat_demo, step="chat_debrief").status_code == 302
    assert "CHAT-COMPLETE" in client.get(step_url(chat_demo)).content.decode()
    assert Participant.objects.get(external_id="CHAT1").status == "completed"


def test_the_stream_sends_the_reply_in_chunks_and_a_second_post_stores_nothing(client, chat_demo):
    enter(client, chat_demo, "CHAT2")
    post_step(client, chat_demo, decision="agree")
    post_step(client, chat_demo, step="chat_opening", opening="corpus")
    response = client.post(
        step_url(chat_demo),
        {"step": "chat_talk", "action": "send", "message": "I failed my exam today."},
        HTTP_ACCEPT="application/x-ndjson",
    )
    assert response.streaming
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    chunks = [line["chunk"] for line in lines if "chunk" in line]
    done = lines[-1]
    assert len(chunks) > 3 and "".join(chunks) == done["text"] and done["done"] == 1
    again = client.post(
        step_url(chat_demo), {"step": "chat_talk", "action": "send", "message": "I failed my exam today."}
    )
    assert (
        again.status_code == 302
    )  # the double post: the conversation is open again, so it is a new message…
    conversation = Conversation.objects.get(participant__external_id="CHAT2")
    assert conversation.turns.count() == 4  # … stored once, with its own reply


def test_a_message_too_short_is_refused_and_nothing_stored(client, chat_demo):
    enter(client, chat_demo, "CHAT3")
    post_step(client, chat_demo, decision="agree")
    post_step(client, chat_demo, step="chat_opening", opening="corpus")
    response = post_step(client, chat_demo, step="chat_talk", action="send", message="hi")
    assert response.status_code == 400 and "at least 5 characters" in response.content.decode()
    assert not Turn.objects.filter(conversation__participant__external_id="CHAT3").exists()
    refused = post_step(client, chat_demo, step="chat_talk", action="finish")
    assert refused.status_code == 400  # fewer than the minimum of messages


def test_make_run_prints_the_chat_participant_link(settings, tmp_path):
    import io

    from django.core.management import call_command

    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    assert "Chat participant link: http://" in out.getvalue()
    assert "/s/chat-demo/?PROLIFIC_PID=" in out.getvalue()
    assert (
        "Chat responder console (sign in as admin): http://127.0.0.1:8000/analysis/chat-demo/chat/console/\n"
        in (out.getvalue())
    )


def test_chat_demo_balances_its_model_and_its_person_source_with_the_label(fast_model):
    study = chat_demo_create()
    sources = dict(study.conditions.filter(enrolling=True).values_list("name", "kind"))
    assert sources == {MODEL_SOURCE: "llm", PERSON: "human"}
    assert study.chat_settings.person_reply_seconds == PERSON_REPLY_SECONDS
    assert f"within {PERSON_REPLY_SECONDS} seconds" in study.chat_settings.debrief_text
    for i in range(8):
        client = Client()
        enter(client, study, f"BAL{i}")
        assert post_step(client, study, decision="agree").status_code == 302
    cells = Counter(
        Conversation.objects.filter(participant__study=study).values_list("condition__name", "label")
    )
    assert cells == {(source, label): 2 for source in (MODEL_SOURCE, PERSON) for label in ("ai", "person")}


def test_the_demos_admin_may_answer_at_chat_demos_console(settings, tmp_path, client):
    settings.VAR_DIR = tmp_path
    demo_seed(base_url="http://testserver")
    client.force_login(get_user_model().objects.get(username=ADMIN_USERNAME))
    page = client.get("/analysis/chat-demo/chat/console/")
    assert page.status_code == 200 and "0 conversations waiting for a person" in page.content.decode()


def test_the_study_admin_shows_the_chat_settings_and_a_conversation_its_turns(admin_client, chat_demo):
    page = admin_client.get(f"/admin/studies/study/{chat_demo.pk}/change/")
    assert page.status_code == 200 and "chat settings" in page.content.decode().lower()
    client_conversation = Conversation.objects.create(
        participant=Participant.objects.create(
            study=chat_demo, condition=chat_demo.conditions.first(), external_id="A"
        ),
        condition=chat_demo.conditions.first(),
        label="ai",
    )
    shown = admin_client.get(f"/admin/chat/conversation/{client_conversation.pk}/change/")
    assert shown.status_code == 200


def test_the_participants_own_situation_is_their_first_message_and_its_reply_follows(client, chat_demo):
    enter(client, chat_demo, "CHAT4")
    post_step(client, chat_demo, decision="agree")
    too_short = post_step(client, chat_demo, step="chat_opening", opening="own", own_text="sad")
    assert too_short.status_code == 400 and not Turn.objects.filter(
        conversation__participant__external_id="CHAT4"
    )
    own = "My best friend moved abroad and I feel left behind."
    assert post_step(client, chat_demo, step="chat_opening", opening="own", own_text=own).status_code == 302
    step, page = current_step(client, chat_demo)
    assert step == "chat_talk" and "Show the reply" in page.content.decode()
    conversation = Conversation.objects.get(participant__external_id="CHAT4")
    assert conversation.opening_source == "own" and conversation.opening_text == own
    assert post_step(client, chat_demo, step="chat_talk", action="resume").status_code == 302
    turns = list(conversation.turns.order_by("index"))
    assert [(t.role, t.status) for t in turns] == [("participant", "complete"), ("responder", "complete")]
    assert turns[0].text == own and turns[1].prompt["messages"][-1]["content"] == own
