"""The human-responder console: the queue, exclusive claims under concurrency, replies inside the time limit."""

from datetime import timedelta

import pytest
from django.utils import timezone

from kinds.chat.console import (
    ConsoleError,
    claim_next,
    claim_release,
    held_by,
    queue_length,
    reply_send,
    responders_group,
)
from kinds.chat.models import ChatSettings, Conversation, ResponderClaim, Turn
from studies.models import Condition, Participant
from tests.factories import ConditionFactory, ParticipantFactory, StudyFactory
from tests.studies.test_assignment_races import race


def person_study(waiting: int, *, seconds: int = 60):
    study = StudyFactory(kind="chat")
    ChatSettings.objects.create(study=study, labels=["ai", "person"], person_reply_seconds=seconds)
    person = ConditionFactory(study=study, name="person", kind=Condition.Kind.HUMAN)
    gpt = ConditionFactory(study=study, name="gpt", kind=Condition.Kind.LLM, is_baseline=True)
    now = timezone.now()
    for i in range(waiting):
        p = ParticipantFactory(study=study, condition=person, status=Participant.Status.ACTIVE)
        c = Conversation.objects.create(participant=p, condition=person, label="person", state="awaiting")
        Turn.objects.create(conversation=c, index=0, role="participant", text=f"message {i}", sent_at=now)
        Turn.objects.create(
            conversation=c,
            index=1,
            role="responder",
            status="pending",
            sent_at=now + timedelta(milliseconds=i),
        )
    # an LLM source's pending reply is never in the people's queue
    p = ParticipantFactory(study=study, condition=gpt)
    c = Conversation.objects.create(participant=p, condition=gpt, label="ai", state="awaiting")
    Turn.objects.create(conversation=c, index=1, role="responder", status="pending", sent_at=now)
    return study


def responder(django_user_model, name):
    user = django_user_model.objects.create_user(username=name, password="x-pass-123456", is_staff=True)
    user.groups.add(responders_group())
    return django_user_model.objects.get(pk=user.pk)  # fresh permission cache


@pytest.mark.django_db
def test_queue_claim_reply_and_release(django_user_model):
    study = person_study(2)
    alice = responder(django_user_model, "alice")
    assert queue_length(study) == 2
    first = claim_next(study, alice)
    assert first.conversation.turns.get(index=0).text == "message 0"  # oldest first
    assert queue_length(study) == 1
    (held,) = held_by(study, alice)
    assert [t.text for t in held.transcript] == ["message 0"] and 0 < held.seconds_left <= 60
    with pytest.raises(ConsoleError, match="Write a reply"):
        reply_send(study, alice, first.pk, "   ")
    done = reply_send(study, alice, first.pk, "That sounds hard. Tell me more?")
    assert done.status == "complete" and done.responder == alice and done.finish_reason == "person"
    assert done.conversation.state == "open"
    with pytest.raises(ConsoleError, match="already sent"):
        reply_send(study, alice, first.pk, "again")
    second = claim_next(study, alice)
    claim_release(study, alice, second.pk)
    assert queue_length(study) == 1


@pytest.mark.django_db
def test_not_a_responder_cannot_take_or_answer(django_user_model):
    study = person_study(1)
    alice = responder(django_user_model, "alice")
    bob = django_user_model.objects.create_user(username="bob", password="x-pass-123456", is_staff=True)
    with pytest.raises(ConsoleError):
        claim_next(study, bob)
    turn = claim_next(study, alice)
    with pytest.raises(ConsoleError, match="not yours"):
        reply_send(study, bob, turn.pk, "hello")


@pytest.mark.django_db
def test_past_the_time_limit_the_reply_is_refused_and_leaves_the_queue(django_user_model):
    study = person_study(1, seconds=10)
    alice = responder(django_user_model, "alice")
    turn = claim_next(study, alice)
    later = timezone.now() + timedelta(seconds=11)
    with pytest.raises(ConsoleError, match="fallback"):
        reply_send(study, alice, turn.pk, "sorry, late", now=later)
    assert (
        Turn.objects.get(pk=turn.pk).status == "pending"
    )  # the participant's request hands it to the fallback
    assert queue_length(study, now=later) == 0 and held_by(study, alice, now=later) == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_racing_responders_never_take_the_same_reply(requires_postgres, django_user_model):
    study = person_study(5)
    users = [responder(django_user_model, f"r{i}") for i in range(12)]

    results, errors = race(lambda i: claim_next(study, users[i]), 12)

    assert not errors, errors
    taken = [turn.pk for turn in results.values() if turn is not None]
    assert len(taken) == 5 == len(set(taken))  # every waiting reply taken once, by one responder
    assert ResponderClaim.objects.count() == 5
    assert sorted(ResponderClaim.objects.values_list("turn_id", flat=True)) == sorted(taken)

    # and two responders sending to one claimed reply: only its holder's is stored
    turn_id = taken[0]
    holder = ResponderClaim.objects.get(turn_id=turn_id).responder
    other = next(u for u in users if u.pk != holder.pk)

    def send(i):
        return reply_send(study, holder if i % 2 else other, turn_id, f"reply {i}")

    results, errors = race(send, 8)
    assert len(results) == 1 and all(isinstance(e, ConsoleError) for e in errors.values())
    assert Turn.objects.get(pk=turn_id).responder_id == holder.pk


@pytest.mark.django_db
def test_console_pages_work_as_plain_form_posts(client, django_user_model):
    study = person_study(1)
    alice = responder(django_user_model, "alice")
    url = f"/analysis/{study.slug}/chat/console/"
    assert client.get(url).status_code == 302  # to the login
    client.force_login(
        django_user_model.objects.create_user(username="nobody", password="x-pass-1234", is_staff=True)
    )
    assert client.get(url).status_code == 403
    client.force_login(alice)
    page = client.get(url).content.decode()
    assert "1 conversation waiting for a person" in page and 'id="nothing-held"' in page
    client.post(url + "take")
    page = client.get(url).content.decode()
    assert "message 0" in page and "Time left for this reply" in page
    turn = ResponderClaim.objects.get().turn
    assert client.get(url + "status.json").json()["held"][str(turn.pk)] > 0
    response = client.post(url + "reply", {"turn": turn.pk, "text": "I hear you."}, follow=True)
    assert "Your reply was sent." in response.content.decode()
    assert Turn.objects.get(pk=turn.pk).text == "I hear you."


@pytest.mark.django_db
def test_a_reply_to_a_crisis_message_waits_out_of_the_queue_until_the_participant_goes_back(
    django_user_model,
):
    """While the participant reads the support resources no responder may take the reply, and its time limit does
    not run; going back asks for it then, with the whole limit, and the responder sees the message was flagged."""
    from kinds.chat.safety import crisis_resume

    study = person_study(1, seconds=60)
    conversation = Conversation.objects.get(participant__study=study, condition__name="person")
    message = conversation.turns.get(index=0)
    message.safety = {"crisis": True, "terms": ["ending my life"], "checks": ["crisis_terms"]}
    message.save(update_fields=["safety"])
    long_ago = timezone.now() - timedelta(seconds=50)
    conversation.turns.filter(index=1).update(sent_at=long_ago)
    Conversation.objects.filter(pk=conversation.pk).update(crisis_open=True)
    alice = responder(django_user_model, "alice")

    assert queue_length(study) == 0 and claim_next(study, alice) is None
    crisis_resume(conversation)
    assert queue_length(study) == 1
    taken = claim_next(study, alice)
    (held,) = held_by(study, alice)
    assert taken.sent_at > long_ago and held.seconds_left > 55
    assert held.transcript[0].safety["crisis"]
