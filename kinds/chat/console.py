"""The human-responder console's services: a person source's replies are typed by staff with the responder role
(the "Responders" group, permission `chat.respond`; superusers have it), who take waiting conversations from a
queue.

* The queue: pending replies of conversations whose source is a person, not claimed, still inside the study's
  time limit a reply (`ChatSettings.person_reply_seconds`, counted from the participant's message), oldest first;
  a responder is offered first the conversations they answered before (the same person keeps a conversation).
* `claim_next`: takes the first of them under SELECT … FOR UPDATE SKIP LOCKED and writes a `ResponderClaim`
  (unique per turn) in the same transaction: two responders never take the same reply, and neither waits on
  the other's lock.
* `reply_send`: completes the reply through the chat's one completion (kinds/chat/turns.py `reply_complete`:
  once, whoever comes first) while the claim is the responder's and the time limit has not passed; past it the
  participant's request has handed the reply to the design's fallback condition.
* `claim_release`: gives a claimed reply back to the queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from studies.models import Condition, Study

from .models import ChatSettings, ResponderClaim, Turn
from .turns import chat_settings, reply_complete

PERMISSION = "chat.respond"
RESPONDERS = "Responders"  # the group the migration creates; staff accounts join it in the admin


class ConsoleError(Exception):
    """The responder's action cannot be done (said in words on the console)."""


@dataclass(frozen=True)
class Held:
    """A reply a responder holds: the turn, its conversation's turns so far and the seconds left."""

    turn: Turn
    transcript: list[Turn]
    deadline: datetime

    @property
    def seconds_left(self) -> int:
        return max(0, int((self.deadline - timezone.now()).total_seconds()))


def responders_group() -> Group:
    """The responder role (created by the migration; made again here after a flush, e.g. by the demo's seed)."""
    group, _ = Group.objects.get_or_create(name=RESPONDERS)
    group.permissions.add(
        Permission.objects.get(
            content_type=ContentType.objects.get_for_model(ResponderClaim), codename="respond"
        )
    )
    return group


def may_respond(user) -> bool:
    return bool(user.is_authenticated and user.is_staff and user.has_perm(PERMISSION))


def deadline_of(turn: Turn, settings: ChatSettings) -> datetime:
    return turn.sent_at + timedelta(seconds=settings.person_reply_seconds)


def _waiting(study: Study, now: datetime):
    """The study's pending person-source replies inside the time limit, unclaimed (the queue, module doc). A reply
    to a message that named a crisis waits out of the queue while the participant reads the support resources:
    it is asked for, and its time limit starts, when they go back to the conversation (safety.crisis_resume)."""
    settings = chat_settings(study)
    return Turn.objects.filter(
        conversation__participant__study=study,
        conversation__condition__kind=Condition.Kind.HUMAN,
        conversation__crisis_open=False,
        role=Turn.Role.RESPONDER,
        status=Turn.Status.PENDING,
        claim__isnull=True,
        sent_at__gt=now - timedelta(seconds=settings.person_reply_seconds),
    )


def queue_length(study: Study, now: datetime | None = None) -> int:
    return _waiting(study, now or timezone.now()).count()


def claim_next(study: Study, responder, now: datetime | None = None) -> Turn | None:
    """Takes the next waiting reply for `responder` (module doc); None when the queue is empty."""
    if not may_respond(responder):
        raise ConsoleError("Only responders may take conversations.")
    now = now or timezone.now()
    answered_before = Turn.objects.filter(responder=responder).values("conversation_id")
    for preferred in (Q(conversation_id__in=answered_before), Q()):
        try:
            with transaction.atomic():
                turn = (
                    _waiting(study, now)
                    .filter(preferred)
                    .select_for_update(skip_locked=True, of=("self",))
                    .order_by("sent_at", "pk")
                    .first()
                )
                if turn is not None:
                    ResponderClaim.objects.create(turn=turn, responder=responder, claimed_at=now)
                    return turn
        except IntegrityError:  # claimed by another responder between our read and our lock: look again
            return claim_next(study, responder, now)
    return None


def held_by(study: Study, responder, now: datetime | None = None) -> list[Held]:
    """The replies `responder` holds in `study` that still wait for them (pending, inside the time limit)."""
    now = now or timezone.now()
    settings = chat_settings(study)
    turns = (
        Turn.objects.filter(
            claim__responder=responder,
            conversation__participant__study=study,
            status=Turn.Status.PENDING,
            sent_at__gt=now - timedelta(seconds=settings.person_reply_seconds),
        )
        .select_related("conversation")
        .order_by("sent_at")
    )
    return [
        Held(
            turn=turn,
            transcript=list(
                turn.conversation.turns.filter(index__lt=turn.index, status=Turn.Status.COMPLETE).order_by(
                    "index"
                )
            ),
            deadline=deadline_of(turn, settings),
        )
        for turn in turns
    ]


def _claimed(study: Study, responder, turn_id: int) -> Turn:
    turn = (
        Turn.objects.filter(pk=turn_id, conversation__participant__study=study, claim__responder=responder)
        .select_related("conversation")
        .first()
    )
    if turn is None:
        raise ConsoleError("That reply is not yours to answer.")
    return turn


def reply_send(study: Study, responder, turn_id: int, text: str, now: datetime | None = None) -> Turn:
    """Sends the responder's reply (module doc); ConsoleError saying why when it cannot be sent."""
    now = now or timezone.now()
    turn = _claimed(study, responder, turn_id)
    settings = chat_settings(study)
    text = (text or "").strip()
    if not text:
        raise ConsoleError("Write a reply before sending it.")
    if len(text) > settings.max_chars * 4:
        raise ConsoleError(f"A reply has at most {settings.max_chars * 4} characters.")
    if turn.status != Turn.Status.PENDING:
        raise ConsoleError("This reply was already sent.")
    if now >= deadline_of(turn, settings):
        raise ConsoleError("The time limit passed: the study's fallback answered this message.")
    done = reply_complete(turn, text=text, responder=responder, now=now)
    if done is None:
        raise ConsoleError("The time limit passed: the study's fallback answered this message.")
    return done


def claim_release(study: Study, responder, turn_id: int) -> None:
    """Gives a claimed, still pending reply back to the queue."""
    turn = _claimed(study, responder, turn_id)
    ResponderClaim.objects.filter(turn=turn, responder=responder, turn__status=Turn.Status.PENDING).delete()
