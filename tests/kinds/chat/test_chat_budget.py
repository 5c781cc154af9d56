"""The chat study's spending limits on its own path (kinds/chat/budget.py, generation/budget.py): the design's
budget and token cap become the study's StudyBudget at enrolment; a spent budget sends newcomers to the "full" page;
a reply the budget cannot cover is the fallback's and ends the conversation, or, when the fallback cannot be
covered either, the conversation closes politely; a participant at their token cap gets the polite close and goes
on to the rating; and a rush of conversations at once (threads on their own PostgreSQL connections against a
loopback provider) never spends more than one call's maximum over the budget, losing or doubling no turn."""

from __future__ import annotations

from decimal import Decimal

import pytest

from generation.budget import StudyBudget, call_maximum
from generation.live_models import LiveCall
from generation.models import LLMConditionConfig, Provider
from generation.providers.placeholder import PlaceholderAdapter
from kinds.chat.budget import chat_budget_sync
from kinds.chat.models import ChatSettings, Conversation, Turn
from kinds.chat.replies import Done, reply_events
from kinds.chat.turns import conversation_messages, participant_turn_store
from studies.models import Condition, Participant
from tests.concurrency import race
from tests.factories import ConditionFactory, ParticipantFactory, StudyFactory
from tests.generation.conftest import make_provider, overlap_gate
from tests.generation.conftest import threaded_server as _threaded_server
from tests.generation.test_respond_now import PATH, sse
from tests.ratings.helpers import current_step, enter, post_step, step_url

pytestmark = pytest.mark.django_db(transaction=True)
threaded_server = _threaded_server  # the providers' tests' fixture: a loopback answering concurrently


@pytest.fixture
def limited(httpserver, api_key, monkeypatch):
    """A chat study whose source is a priced loopback model and whose fallback is the free test model."""
    monkeypatch.setattr(PlaceholderAdapter, "word_seconds", 0.0)
    provider = make_provider(httpserver, kind="openai", timeout_seconds=2.0, max_concurrency=64)
    study = StudyFactory(kind="chat")
    source = ConditionFactory(study=study, name="loop", kind=Condition.Kind.LLM)
    LLMConditionConfig.objects.create(condition=source, provider=provider, model="gpt-test", max_tokens=64)
    fallback = ConditionFactory(study=study, name="fallback", kind=Condition.Kind.LLM, enrolling=False)
    free = Provider.objects.create(name="test-model", kind=PlaceholderAdapter.kind)
    LLMConditionConfig.objects.create(condition=fallback, provider=free, model="test-model")
    ChatSettings.objects.create(study=study, min_reply_wait_ms=0, fallback_condition=fallback, min_chars=1)
    return study


def _conversation(study, n: int = 0) -> Conversation:
    source = study.conditions.get(name="loop")
    participant = ParticipantFactory(study=study, condition=source, external_id=f"B{n}")
    return Conversation.objects.create(participant=participant, condition=source, label="ai")


def _limits(study, *, usd=None, tokens=None) -> None:
    ChatSettings.objects.filter(study=study).update(budget_usd=usd, token_cap_per_participant=tokens)
    study.refresh_from_db()
    chat_budget_sync(study)  # what enrolment does


def _reply(conversation, text="My dog died last week.") -> Turn:
    turn = participant_turn_store(conversation, text)
    events = list(reply_events(turn))
    assert isinstance(events[-1], Done)
    turn.refresh_from_db()
    return turn


def _source_maximum(study, conversation, text) -> Decimal:
    config = LLMConditionConfig.objects.select_related("provider").get(
        condition__study=study, condition__name="loop"
    )
    messages = [*conversation_messages(conversation, before=10_000), {"role": "user", "content": text}]
    return call_maximum(provider=config.provider, system=config.system_prompt, messages=messages,
                        max_tokens=config.max_tokens)  # fmt: skip


def test_a_spent_budget_sends_newcomers_to_the_full_page(client, chat_demo):
    ChatSettings.objects.filter(study=chat_demo).update(budget_usd=Decimal("0.50"))
    enter(client, chat_demo, "FIRST")
    assert current_step(client, chat_demo)[0] == "consent"
    budget = StudyBudget.objects.get(study=chat_demo)  # the design's budget, held by generation's
    assert budget.cap == Decimal("0.50") and budget.participant_token_cap is None
    StudyBudget.objects.filter(pk=budget.pk).update(spent=Decimal("0.50"))

    page = enter(client.__class__(), chat_demo, "SECOND").content.decode()
    assert "All places are taken" in page
    assert not Participant.objects.filter(external_id="SECOND").exists()  # nothing written


def test_a_reply_the_budget_cannot_cover_is_the_fallbacks_and_ends_the_conversation(httpserver, limited):
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse())
    _limits(limited, usd=Decimal("0.00"))  # nothing for the priced source; the free fallback still fits
    conversation = _conversation(limited)
    reply = _reply(conversation)
    assert reply.status == "complete" and reply.text and reply.condition.name == "fallback"
    conversation.refresh_from_db()
    assert (conversation.state, conversation.closed_by, conversation.fallback_used) == (
        "ended",
        "budget",
        True,
    )
    assert len(httpserver.log) == 0  # the source was never sent anything
    assert "budget" in reply.error


def test_when_the_fallback_cannot_be_covered_either_the_conversation_closes_politely(client, chat_demo):
    ChatSettings.objects.filter(study=chat_demo).update(budget_usd=Decimal("1.00"))
    Provider.objects.filter(configs__condition__study=chat_demo).update(
        price_input_per_million="5", price_output_per_million="20"
    )
    enter(client, chat_demo, "CLOSE1")
    post_step(client, chat_demo, decision="agree")
    post_step(client, chat_demo, step="chat_opening", opening="corpus")
    StudyBudget.objects.filter(study=chat_demo).update(spent=Decimal("1.00"))  # spent by others meanwhile

    assert (
        post_step(
            client, chat_demo, step="chat_talk", action="send", message="My exam went badly."
        ).status_code
        == 302
    )
    conversation = Conversation.objects.get(participant__external_id="CLOSE1")
    reply = conversation.turns.get(role=Turn.Role.RESPONDER)
    assert (reply.status, reply.text, reply.finish_reason, reply.condition_id) == (
        "complete",
        "",
        "budget_spent",
        None,
    )
    assert (conversation.state, conversation.closed_by) == ("ended", "budget")
    assert not LiveCall.objects.exists()
    html = client.get(step_url(chat_demo)).content.decode()
    assert "This conversation has come to its end" in html and "Finish the conversation and continue" in html
    assert "data-chat-form hidden" in html  # no more messages
    assert post_step(client, chat_demo, step="chat_talk", action="finish").status_code == 302
    assert current_step(client, chat_demo)[0] == "chat_rate"


def test_a_participant_at_their_token_cap_gets_a_polite_close_and_goes_on_to_the_rating(httpserver, limited):
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse())
    conversation = _conversation(limited)
    first = _source_maximum(limited, conversation, "My dog died last week.")
    _limits(
        limited, tokens=first.tokens + 5
    )  # room for the first call; its 25 tokens leave less than a second
    assert _reply(conversation).text == "That sounds really hard."
    closing = _reply(conversation, "I keep looking for him at the door.")
    assert (closing.status, closing.text, closing.finish_reason) == ("complete", "", "token_cap")
    conversation.refresh_from_db()
    assert (conversation.state, conversation.closed_by, conversation.fallback_used) == (
        "ended",
        "token_cap",
        False,
    )
    assert (
        len(httpserver.log) == 1 and LiveCall.objects.count() == 1
    )  # neither the source nor the fallback asked


def test_a_rush_of_conversations_spends_at_most_one_call_over_the_budget(
    threaded_server, limited, requires_postgres
):
    # A provider answering concurrently, its calls dear (a reply's maximum about $0.10), the source's and the
    # fallback's alike: every reply, the fallback's too, is held against the budget. The first two calls wait for
    # each other, so reservations overlap whatever the machine's speed.
    gate = overlap_gate(calls=2, timeout=5)
    words = sse()

    def handler(request):
        gate()
        return words(request)

    threaded_server.expect_request(PATH, method="POST").respond_with_handler(handler)
    rush = make_provider(threaded_server, kind="openai", name="rush", max_concurrency=100, timeout_seconds=10,
                         price_input_per_million=1000, price_output_per_million=1000)  # fmt: skip
    LLMConditionConfig.objects.filter(condition__study=limited).update(
        provider=rush, model="gpt-test", max_tokens=64
    )
    n, room = 16, 2
    conversations = [_conversation(limited, i) for i in range(n)]
    maximum = _source_maximum(limited, conversations[0], "My exam went badly today.")
    cap = (maximum.cost * room).quantize(Decimal("0.01"), rounding="ROUND_UP")
    _limits(limited, usd=cap)

    def talk(i):
        turn = participant_turn_store(conversations[i], "My exam went badly today.")
        return type(list(reply_events(turn))[-1]).__name__

    results, errors = race(talk, n)
    assert not errors and set(results.values()) == {"Done"}
    budget = StudyBudget.objects.get(study=limited)
    assert budget.reserved == 0 and budget.spent <= budget.cap + maximum.cost
    replies = Turn.objects.filter(conversation__in=conversations, role=Turn.Role.RESPONDER)
    assert replies.count() == n and not replies.filter(status="pending").exists()  # none lost, none doubled
    closed = replies.filter(finish_reason="budget_spent")
    answered = replies.exclude(finish_reason="budget_spent")
    assert closed.exists() and answered.exists()  # the rush was more than the budget holds
    assert answered.count() == LiveCall.objects.filter(outcome=LiveCall.Outcome.OK).count()
    assert set(Conversation.objects.filter(turns__in=closed).values_list("closed_by", flat=True)) == {
        "budget"
    }
