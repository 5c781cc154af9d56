"""The chat kind's answers, each through the spine's one answer protocol (studies/answers.py): the opening, the
end of the conversation, the rating and the debrief read are the participant's four pages, each taken once."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from studies.answers import InvalidValue, Page, answer_take
from studies.kinds import participant_steps
from studies.participants import participant_lock, participant_state_copy

from .kind import DEBRIEF, OPENING, RATE, TALK
from .models import ChatRating, ChatSettings, Conversation, Turn
from .pets import KEYS, MAX, MIN, pets_scores
from .turns import (
    ConversationClosed,
    chat_settings,
    message_problem,
    participant_turn_store,
    participant_turns,
)


def chat_pages(participant, conversation: Conversation) -> list[Page]:
    answered = {
        OPENING: conversation.opened_at is not None,
        TALK: conversation.ended_at is not None,
        RATE: ChatRating.objects.filter(conversation=conversation).exists(),
        DEBRIEF: conversation.debriefed_at is not None,
    }
    steps = [s for s in participant_steps(participant.study) if s in answered]
    return [Page(position, step, answered[step]) for position, step in enumerate(steps)]


def _take(participant, step: str, store, now: datetime) -> bool:
    """Locks the participant, takes the answer of `step`'s page with `store(conversation)`; True when stored."""
    with transaction.atomic():
        locked = participant_lock(participant)
        conversation = Conversation.objects.select_for_update().get(participant=locked)
        pages = chat_pages(locked, conversation)
        position = next(p.position for p in pages if p.step == step)

        def write(page: Page) -> bool:
            store(conversation)
            return False  # no attention check on these pages

        taken = answer_take(locked, pages=pages, position=position, now=now, store=write)
    if taken.created:
        participant_state_copy(participant, locked)
    return taken.created


def opening_submit(*, participant, own_text: str | None = None, now: datetime | None = None) -> bool:
    """The opening taken: the corpus situation read (`own_text` None), or the participant's own situation, which
    is their first message (the reply to it is asked for on the conversation page)."""
    now = now or timezone.now()
    settings = chat_settings(participant.study)
    if own_text is not None:
        if settings.opening == ChatSettings.Opening.CORPUS:
            raise InvalidValue("This study gives a situation; it does not take your own.")
        problem = message_problem(own_text, settings)
        if problem:
            raise InvalidValue(problem)
    elif settings.opening == ChatSettings.Opening.OWN:
        raise InvalidValue("Please describe your situation.")

    def store(conversation: Conversation) -> None:
        if own_text is None and conversation.situation_id is None:
            raise InvalidValue("This study has no situation to give; please describe your own.")
        conversation.opened_at = now
        if own_text is None:
            conversation.opening_source = Conversation.OpeningSource.CORPUS
            conversation.opening_text = conversation.situation.text
        else:
            conversation.opening_source = Conversation.OpeningSource.OWN
            conversation.opening_text = own_text.strip()
        conversation.save(update_fields=["opened_at", "opening_source", "opening_text"])
        if own_text is not None:
            participant_turn_store(conversation, own_text, now=now)

    return _take(participant, OPENING, store, now)


def conversation_end(*, participant, crisis: bool = False, now: datetime | None = None) -> bool:
    """The participant ends the conversation (after the study's minimum of messages, with the reply to their
    last one shown) and moves on to the rating. `crisis`: ended from the support resources, at once whatever the
    minimum (state `ended_crisis`); the reply not yet asked for is dropped, never sent; the rating and the
    completion code follow as for any participant."""
    now = now or timezone.now()

    def store(conversation: Conversation) -> None:
        settings = chat_settings(participant.study)
        if crisis:
            if not conversation.crisis_open:
                raise InvalidValue("The support resources are not shown: finish the conversation as usual.")
            # The reply to the message that named a crisis was held back while the resources were shown: no model
            # was asked (the row has no attempt) and none will be.
            conversation.turns.filter(status=Turn.Status.PENDING).delete()
            conversation.state = Conversation.State.ENDED_CRISIS
            conversation.crisis_open = False
            conversation.ended_at = now
            conversation.save(update_fields=["state", "crisis_open", "ended_at"])
            return
        if conversation.state == Conversation.State.AWAITING:
            raise ConversationClosed("the reply to your last message is still on its way")
        if (
            conversation.state == Conversation.State.OPEN
            and participant_turns(conversation) < settings.min_turns
        ):
            raise InvalidValue(f"Please send at least {settings.min_turns} messages before you finish.")
        if conversation.state == Conversation.State.OPEN:
            conversation.state = Conversation.State.ENDED
        conversation.ended_at = now
        conversation.save(update_fields=["state", "ended_at"])

    return _take(participant, TALK, store, now)


def rating_submit(
    *,
    participant,
    pets: dict[str, int],
    order: list[str],
    scale_value: int,
    free_text: str = "",
    response_time_ms: int | None = None,
    now: datetime | None = None,
) -> bool:
    """The rating of the conversation: every PETS item (0–100), a value of the study's scale, optional text."""
    now = now or timezone.now()
    settings = chat_settings(participant.study)
    if set(pets) != set(KEYS) or any(not (MIN <= int(v) <= MAX) for v in pets.values()):
        raise InvalidValue("Every statement needs an answer from 0 to 100.")
    values = [o.get("value") for o in settings.scale if isinstance(o, dict)]
    if scale_value not in values:
        raise InvalidValue("Please choose one of the answers.")
    scores = pets_scores({k: int(v) for k, v in pets.items()})

    def store(conversation: Conversation) -> None:
        ChatRating.objects.create(
            conversation=conversation,
            pets={k: int(pets[k]) for k in KEYS},
            pets_order=list(order),
            pets_er=scores["er"],
            pets_ut=scores["ut"],
            scale_value=scale_value,
            free_text=(free_text or "").strip()[:5000] if settings.ask_free_text else "",
            response_time_ms=response_time_ms,
        )

    return _take(participant, RATE, store, now)


def debrief_read(*, participant, now: datetime | None = None) -> bool:
    now = now or timezone.now()

    def store(conversation: Conversation) -> None:
        conversation.debriefed_at = now
        conversation.save(update_fields=["debriefed_at"])

    return _take(participant, DEBRIEF, store, now)
