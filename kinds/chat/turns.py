"""A conversation's turns, each stored before it is shown.

* The participant's message: `participant_turn_store` writes it and, in the same transaction, the reply's row,
  pending: nothing is sent to a model before both are committed, and nothing before the message's safety check
  (kinds/chat/safety.py `participant_message_settle`, run after the commit) has passed.
* The reply: kinds/chat/replies.py produces it (`reply_events`, `reply_events_async`) and stores it here,
  `reply_row_complete`: an UPDATE on `status='pending'` (and the producer's lease, when it has one) under the
  conversation's lock, so a reply is stored once, never twice. A person source's reply is typed at the responder
  console (`reply_complete`). A spending limit that refuses every call able to answer closes the conversation
  politely (`reply_close`: the row completed with no model asked, kinds/chat/budget.py).
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from generation.models import LLMConditionConfig

from .models import ChatSettings, Conversation, Turn
from .safety import crisis_open_fields, message_check


class ConversationClosed(Exception):
    """The conversation takes no message now (a reply is awaited, it has ended, or the turns are used up)."""


class MessageInvalid(ValueError):
    """The message is too short or too long."""


def chat_settings(study) -> ChatSettings:
    try:
        return study.chat_settings
    except ChatSettings.DoesNotExist:
        return ChatSettings(study=study)


def participant_turns(conversation: Conversation) -> int:
    return conversation.turns.filter(role=Turn.Role.PARTICIPANT).count()


def message_problem(text: str, settings: ChatSettings) -> str | None:
    """Why a message cannot be sent (None: it can)."""
    length = len(text.strip())
    if length < settings.min_chars:
        return f"Please write at least {settings.min_chars} characters ({length} so far)."
    if length > settings.max_chars:
        return f"Please keep your message to {settings.max_chars} characters ({length} now)."
    return None


def participant_turn_store(conversation: Conversation, text: str, *, now: datetime | None = None) -> Turn:
    """Stores the participant's message (unchecked: its safety check follows, outside the transaction) and the
    reply's pending row, in one transaction under the conversation's lock; returns the reply's row. Raises ConversationClosed when it is not the participant's turn (a double
    post, a second tab: nothing stored) and MessageInvalid for a message of the wrong length."""
    now = now or timezone.now()
    text = text.strip()
    with transaction.atomic():
        # of=("self",): the conversation's row only. select_related alone would lock the participant's and the
        # study's rows too, and every message of the study would wait in line for the study's row.
        locked = (
            Conversation.objects.select_for_update(of=("self",))
            .select_related("participant__study")
            .get(pk=conversation.pk)
        )
        settings = chat_settings(locked.participant.study)
        problem = message_problem(text, settings)
        if problem:
            raise MessageInvalid(problem)
        if locked.state != Conversation.State.OPEN:
            raise ConversationClosed(f"the conversation is {locked.state}")
        index = locked.turns.count()
        if participant_turns(locked) >= settings.max_turns:
            raise ConversationClosed("the conversation's turns are used up")
        # Unchecked ({}) until kinds/chat/safety.py's participant_message_settle, after the commit: the check may
        # call the moderation endpoint, which waits on the network and must not hold this lock.
        Turn.objects.create(
            conversation=locked, index=index, role=Turn.Role.PARTICIPANT, text=text, sent_at=now, safety={}
        )
        reply = Turn.objects.create(
            conversation=locked,
            index=index + 1,
            role=Turn.Role.RESPONDER,
            status=Turn.Status.PENDING,
            condition_id=locked.condition_id,
            sent_at=now,
        )
        locked.state = Conversation.State.AWAITING
        locked.save(update_fields=["state"])
    conversation.state = locked.state
    return reply


def pending_reply(conversation: Conversation) -> Turn | None:
    return conversation.turns.filter(role=Turn.Role.RESPONDER, status=Turn.Status.PENDING).first()


def conversation_messages(conversation: Conversation, *, before: int) -> list[dict]:
    """What a model is sent: the turns before `before`, the participant's as "user", the replies as
    "assistant" (the condition's system prompt comes from its settings)."""
    turns = conversation.turns.filter(index__lt=before).exclude(status=Turn.Status.PENDING).order_by("index")
    return [
        {"role": "user" if t.role == Turn.Role.PARTICIPANT else "assistant", "content": t.text} for t in turns
    ]


def reply_config_fields(condition) -> dict:
    """What a model reply stores of its condition's settings: the model asked for, decoding settings, seed."""
    config = LLMConditionConfig.objects.filter(condition=condition).first()
    if config is None:
        return {}
    return {
        "model": config.model,
        "settings": {
            "temperature": config.temperature,
            "top_p": config.top_p,
            "max_tokens": config.max_tokens,
        },
        "seed": config.seed,
    }


def reply_row_complete(
    turn: Turn, fields: dict, *, lease=None, fallback: bool = False, closed_by: str = "", crisis: bool = False
) -> Turn | None:
    """Completes the pending row (only while `lease` is held, when given) and gives the participant the turn
    back, or ends the conversation when their turns are used up or a spending limit closes it (`closed_by`).
    `crisis`: the reply was withheld for naming a crisis, the support resources open with it. None: another
    request completed it first."""
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=turn.conversation_id)
        rows = Turn.objects.filter(pk=turn.pk, status=Turn.Status.PENDING)
        if lease is not None:
            rows = rows.filter(claimed_until=lease.until)
        if not rows.update(**fields):
            return None
        settings = chat_settings(conversation.participant.study)
        used = (fields.get("input_tokens") or 0) + (fields.get("output_tokens") or 0)
        conversation.tokens_used = F("tokens_used") + used
        conversation.cost = F("cost") + (fields.get("cost") or Decimal(0))
        conversation.fallback_used = conversation.fallback_used or fallback
        if conversation.state == Conversation.State.AWAITING:
            over = closed_by or participant_turns(conversation) >= settings.max_turns
            conversation.state = Conversation.State.ENDED if over else Conversation.State.OPEN
        conversation.closed_by = closed_by or conversation.closed_by
        conversation.save(update_fields=["tokens_used", "cost", "fallback_used", "state", "closed_by"])
        if crisis:
            Conversation.objects.filter(pk=conversation.pk).update(**crisis_open_fields())
    turn.refresh_from_db()
    return turn


def reply_complete(turn: Turn, *, text: str, responder=None, now: datetime | None = None) -> Turn | None:
    """A person's reply typed at the responder console: completes the pending row once (None: it was answered
    already, by them in another tab or by the fallback)."""
    now = now or timezone.now()
    turn = Turn.objects.select_related("conversation__participant__study").get(pk=turn.pk)
    safety = message_check(text, study=turn.conversation.participant.study, role=Turn.Role.RESPONDER)
    fields = {
        "status": Turn.Status.COMPLETE,
        "text": text.strip(),
        "first_token_at": now,
        "completed_at": now,
        "responder": responder,
        "finish_reason": "person",
        "safety": safety,
        "claimed_until": None,
    }
    return reply_row_complete(turn, fields, lease=None)


def reply_close(turn: Turn, lease, *, reason: str) -> Turn | None:
    """The polite close: a spending limit refused every call that could answer, so the pending row is completed
    with no model asked (no text, no condition, `reason` as its finish reason: the page shows a closing note) and
    the conversation ends (`closed_by`); the participant goes on to the rating. None: the lease was lost."""
    fields = {
        "status": Turn.Status.COMPLETE,
        "text": "",
        "condition": None,
        "finish_reason": reason,
        "completed_at": timezone.now(),
        "claimed_until": None,
    }
    return reply_row_complete(turn, fields, lease=lease, closed_by=Turn.CLOSE_REASONS[reason])


def reply_shown(turn: Turn, now: datetime | None = None) -> None:
    Turn.objects.filter(pk=turn.pk, shown_at__isnull=True).update(shown_at=now or timezone.now())
