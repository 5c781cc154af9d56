"""A model's reply checked while it streams (kinds/chat/safety.py ReplyScreen, used by replies.py): the crisis-term
list holds back only the tail that could still complete a term, so no term's text is ever sent, however the
provider splits it into tokens, and a reply that begins no term is shown token by token without delay; with a
moderation provider nothing is shown before the sentence it belongs to is checked. A flagged reply is withheld:
stored with its own text in the verdict, replaced by WITHHELD_TEXT, and the support resources open when it named
a crisis."""

from __future__ import annotations

import json

import pytest
from werkzeug import Response

from kinds.chat.models import ChatSettings, Conversation, Turn
from kinds.chat.replies import Chunk, Done, Reset, reply_events
from kinds.chat.safety import WITHHELD_TEXT, ReplyScreen
from kinds.chat.stream import event_line
from kinds.chat.turns import participant_turn_store
from tests.generation.conftest import make_provider
from tests.generation.test_respond_now import PATH, sse
from tests.kinds.chat import test_replies

chat = test_replies.chat  # the fixture: a chat study whose source is a loopback model


def _shown(tokens, **screen_args) -> tuple[list[str], ReplyScreen]:
    screen = ReplyScreen(**screen_args)
    return [screen.add(token) for token in tokens], screen


def _splits(text: str):
    """Every way of cutting `text` into three tokens."""
    for i in range(1, len(text)):
        for j in range(i + 1, len(text)):
            yield [text[:i], text[i:j], text[j:]]


@pytest.mark.parametrize(
    ("reply", "term"),
    [
        ("It sounds as if you want to die, and", "want"),
        ("Are you thinking of Suicide? Please", "Suicide"),
        ("Do you mean self-harming, or", "self"),
        ("I hear that you can\u2019t go on like this", "can"),
    ],
)
def test_no_split_of_a_term_into_tokens_lets_any_of_it_through(reply, term):
    for tokens in _splits(reply):
        shown, screen = _shown(tokens)
        assert screen.flagged, tokens
        assert "".join(shown) == reply[: len("".join(shown))]
        assert len("".join(shown)) <= reply.index(term), (
            tokens
        )  # nothing of the term, not even its first letter


def test_a_term_whose_end_is_not_decided_is_held_then_shown_when_it_is_another_word():
    shown, screen = _shown(["You could ", "kill", "ing time ", "with a walk."])
    assert shown == ["You could ", "", "killing time ", "with a walk."] and not screen.flagged
    shown, screen = _shown(["Is it a wish to ", "kill", " him?"])
    # "to" could begin "took my own life": held until "kill" says it does not; then "kill him" is a term.
    assert (
        shown == ["Is it a wish ", "to ", ""] and screen.flagged and screen.verdict["terms"] == ["kill him"]
    )


def test_a_reply_that_begins_no_term_is_shown_token_by_token():
    tokens = ["That ", "sounds ", "really ", "hard. ", "Skills ", "take ", "time."]
    shown, screen = _shown(tokens)
    # "take" could begin "take my own life": held until the next word says it does not.
    assert shown == ["That ", "sounds ", "really ", "hard. ", "Skills ", "", "take time."]
    assert screen.rest() == "" and not screen.flagged
    shown, _ = _shown(["w0 ", "w1 ", "w2 "])  # the bench's tokens: none held
    assert shown == ["w0 ", "w1 ", "w2 "]


def test_with_moderation_text_waits_for_its_sentence_and_a_flagged_sentence_withholds_the_rest():
    screen = ReplyScreen(sentences=True)
    assert screen.add("That sounds ") == "" and screen.sentence_due() is None
    assert screen.add("hard. You ") == "" and screen.sentence_due() == len("That sounds hard.")
    assert screen.sentence_checked(len("That sounds hard."), {"ok": True}) == "That sounds hard."
    screen.add("should hit back at them. ")
    due = screen.sentence_due()
    assert screen.sentence_checked(due, {"ok": False, "crisis": False}) == "" and screen.flagged
    assert screen.add("More.") == ""


# --- through the reply's producer -------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_reply_naming_a_crisis_is_withheld_replaced_and_opens_the_resources(httpserver, chat):
    words = ["I ", "understand. ", "Do you want to ", "kill my", "self", "? Talk ", "to me."]
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse(words=words))
    turn = participant_turn_store(chat, "Everything is too much.")
    events = list(reply_events(turn))
    shown = "".join(e.text for e in events if isinstance(e, Chunk))
    assert "kill" not in shown and shown.startswith("I understand.")
    assert any(isinstance(e, Reset) for e in events)  # the harmless words shown are dropped
    done = events[-1]
    assert isinstance(done, Done) and done.turn.text == WITHHELD_TEXT
    assert json.loads(event_line(done)) == {"go": True}  # the page is shown again: the resources first
    stored = Turn.objects.get(pk=turn.pk)
    assert stored.text == WITHHELD_TEXT and stored.safety["withheld"] == "".join(words)
    assert stored.safety["terms"] == ["kill myself"] and stored.safety["crisis"] is True
    conversation = Conversation.objects.get(pk=chat.pk)
    assert conversation.crisis_open and conversation.crisis_count == 1 and conversation.crisis_shown_at


@pytest.mark.django_db(transaction=True)
def test_a_reply_with_no_term_is_shown_whole_and_stored_as_it_is(httpserver, chat):
    words = ["That ", "sounds ", "really ", "hard."]
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse(words=words))
    events = list(reply_events(participant_turn_store(chat, "My dog died.")))
    chunks = [e.text for e in events if isinstance(e, Chunk)]
    assert chunks == words and events[-1].turn.text == "That sounds really hard."
    assert "withheld" not in events[-1].turn.safety and not Conversation.objects.get(pk=chat.pk).crisis_open


@pytest.mark.django_db(transaction=True)
def test_with_a_moderation_provider_no_sentence_is_shown_before_it_is_checked(httpserver, chat, api_key):
    checked: list[str] = []

    def moderation(request):
        text = json.loads(request.data)["input"]
        checked.append(text)
        flagged = "hit back" in text
        body = {"id": "modr-1", "model": "omni-moderation-test", "results": [{
            "flagged": flagged, "categories": {"violence": flagged}, "category_scores": {"violence": 0.5},
        }]}  # fmt: skip
        return Response(json.dumps(body), content_type="application/json")

    httpserver.expect_request("/v1/moderations", method="POST").respond_with_handler(moderation)
    words = ["That ", "sounds ", "hard. ", "You ", "should ", "hit back. ", "Then rest."]
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse(words=words))
    ChatSettings.objects.filter(study=chat.participant.study).update(
        moderation_provider=make_provider(httpserver, kind="openai", name="moderation")
    )
    events = list(reply_events(participant_turn_store(chat, "My brother hit me.")))
    chunks = [e.text for e in events if isinstance(e, Chunk)]
    assert chunks == ["That sounds hard."] and checked[0] == "That sounds hard."
    assert not any("hit" in chunk for chunk in chunks) and isinstance(events[-2], Reset)
    done = events[-1].turn
    assert done.text == WITHHELD_TEXT and done.safety["withheld"] == "".join(words)
    assert done.safety["ok"] is False and done.safety["crisis"] is False
    assert not Conversation.objects.get(pk=chat.pk).crisis_open  # flagged, but no crisis: no resources
