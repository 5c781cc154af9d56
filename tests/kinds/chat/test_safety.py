"""The chat's safety check (kinds/chat/safety.py): the crisis-term list always runs, the provider's moderation
endpoint (a real loopback server speaking OpenAI's /v1/moderations) when the study names one, its failure and a
call inside a transaction recorded rather than hidden, and a participant's crisis message stored with the verdict."""

from __future__ import annotations

import json

import pytest
from django.db import transaction

from kinds.chat.models import Conversation, Turn
from kinds.chat.safety import crisis_terms_in, message_check, safety_check
from tests.generation.conftest import api_key as _api_key
from tests.generation.conftest import make_provider
from tests.ratings.helpers import enter, post_step

pytestmark = pytest.mark.django_db(transaction=True)
api_key = _api_key  # the providers' tests' fixture: their key in the environment


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("I want to kill myself", ["kill myself"]),
        ("I\u2019ve been having suicidal thoughts", ["suicid*"]),
        ("sometimes I SELF-HARM", ["self-harm*"]),
        ("I don't want to\n be alive", ["don't want to be alive"]),
        ("My skill at cooking is killing it", []),
        ("The exam went badly and I feel awful", []),
    ],
)
def test_the_crisis_terms_are_found_as_whole_words(text, found):
    assert crisis_terms_in(text) == found


def test_without_a_moderation_provider_only_the_list_runs(chat_demo):
    result = message_check("I want to die", study=chat_demo, role="participant")
    assert result == {"ok": False, "crisis": True, "terms": ["want to die"], "moderation": None,
                      "checks": ["crisis_terms"]}  # fmt: skip
    assert message_check("My dog is old", study=chat_demo, role="participant")["ok"] is True


def _moderation(flagged: bool, categories: dict):
    def handler(request):
        from werkzeug import Response

        body = {"id": "modr-1", "model": "omni-moderation-test", "results": [{
            "flagged": flagged, "categories": categories,
            "category_scores": {name: 0.9 if on else 0.01 for name, on in categories.items()},
        }]}  # fmt: skip
        return Response(json.dumps(body), content_type="application/json")

    return handler


def test_the_moderation_endpoint_is_asked_and_its_self_harm_verdict_is_a_crisis(
    chat_demo, httpserver, api_key
):
    chat_demo.chat_settings.moderation_provider = make_provider(httpserver, kind="openai")
    categories = {"self-harm": True, "harassment": False, "violence": False}
    httpserver.expect_request("/v1/moderations", method="POST").respond_with_handler(
        _moderation(True, categories)
    )
    result = safety_check("something oblique", study=chat_demo, role="participant")
    assert result.crisis and not result.ok and result.terms == ()
    assert result.moderation == {
        "flagged": True,
        "categories": ["self-harm"],
        "model": "omni-moderation-test",
    }
    sent = json.loads(httpserver.log[0][0].get_data())
    assert sent["input"] == "something oblique" and sent["model"] == "omni-moderation-latest"


def test_a_flag_that_is_not_self_harm_is_not_a_crisis_and_a_failure_is_recorded(
    chat_demo, httpserver, api_key
):
    chat_demo.chat_settings.moderation_provider = make_provider(httpserver, kind="openai")
    httpserver.expect_ordered_request("/v1/moderations").respond_with_handler(
        _moderation(True, {"harassment": True, "self-harm": False})
    )
    httpserver.expect_ordered_request("/v1/moderations").respond_with_json({"error": "down"}, status=503)
    flagged = safety_check("you idiot", study=chat_demo, role="responder")
    assert (flagged.crisis, flagged.flagged, flagged.moderation["categories"]) == (
        False,
        True,
        ["harassment"],
    )
    failed = safety_check("I want to die", study=chat_demo, role="participant")
    assert failed.crisis and "server_error" in failed.moderation["error"]  # the list still ran
    with transaction.atomic():  # no network call while locks are held: recorded as not run
        inside = safety_check("hello", study=chat_demo, role="participant")
    assert "inside a transaction" in inside.moderation["error"] and len(httpserver.log) == 2


def test_a_participants_crisis_message_is_stored_with_its_verdict(client, chat_demo):
    enter(client, chat_demo, "SAFE1")
    post_step(client, chat_demo, decision="agree")
    post_step(client, chat_demo, step="chat_opening", opening="corpus")
    text = "Honestly some days I think about ending my life."
    assert post_step(client, chat_demo, step="chat_talk", action="send", message=text).status_code == 302
    conversation = Conversation.objects.get(participant__external_id="SAFE1")
    stored = Turn.objects.get(conversation=conversation, role=Turn.Role.PARTICIPANT)
    assert (
        stored.text == text
        and stored.safety["crisis"] is True
        and stored.safety["terms"] == ["ending my life"]
    )
    reply = Turn.objects.get(conversation=conversation, role=Turn.Role.RESPONDER)
    assert reply.status == Turn.Status.PENDING and reply.attempts == 0  # the support resources come first
