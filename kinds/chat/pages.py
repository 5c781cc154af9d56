"""The chat kind's pages, one StepPage per step (templates under kinds/chat/templates/ratings/).

The conversation page works with and without JavaScript:
* without: a message is a plain form post; the reply is produced in that request (the minimum wait honoured)
  and shown on the next page (post, redirect, get). A reply still pending when the page is shown (a lost
  connection, a refresh) has a "Show the reply" button that produces it.
* with (static/chat/chat.js): the same form is posted in the background asking for `application/x-ndjson`; the
  reply streams back as lines of JSON ({"chunk": text}, {"wait": text}, {"reset": true}, then {"done": index} or
  {"failed": text}) and is shown word by word; a page shown with a reply pending asks for it the same way
  (`action=resume`).
"""

from __future__ import annotations

import json
import time

from django.db import connection
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from studies.answers import STALE, AnswerRejected
from studies.pages import StepPage

from .answers import conversation_end, debrief_read, opening_submit, rating_submit
from .models import ChatSettings, Conversation, Label, Turn
from .pets import KEYS, MAX, MIN, PETS_ITEMS, pets_order
from .replies import reply_events
from .safety import crisis_resume, participant_message_settle
from .stream import reply_lines
from .turns import (
    ConversationClosed,
    MessageInvalid,
    chat_settings,
    participant_turn_store,
    participant_turns,
    pending_reply,
    reply_shown,
)

STREAM_TYPE = "application/x-ndjson"
LABEL_TEXT = {
    Label.AI: "You will talk with an AI.",
    Label.PERSON: "You will talk with a person.",
    Label.NONE: "",
}


def _conversation(participant) -> Conversation:
    return Conversation.objects.select_related("situation", "condition").get(participant=participant)


def _page(request, participant, template: str, status: int = 200, **context) -> HttpResponse:
    settings = chat_settings(participant.study)
    context.update(
        {"study": participant.study, "participant": participant, "step": participant.step, "chat": settings}
    )
    return render(request, f"ratings/{template}", context, status=status)


def _to_step(participant) -> HttpResponse:
    return redirect("ratings:step", slug=participant.study.slug)


# --- opening -----------------------------------------------------------------------------------------------


def opening_get(request, participant, *, error: str = "", own_text: str = "", status: int = 200):
    conversation = _conversation(participant)
    settings = chat_settings(participant.study)
    offers_corpus = settings.opening != ChatSettings.Opening.OWN and conversation.situation_id is not None
    offers_own = settings.opening != ChatSettings.Opening.CORPUS or conversation.situation_id is None
    return _page(
        request,
        participant,
        "chat_opening.html",
        status=status,
        conversation=conversation,
        label_text=LABEL_TEXT[conversation.label],
        offers_corpus=offers_corpus,
        offers_own=offers_own,
        error=error,
        own_text=own_text,
    )


def opening_post(request, participant):
    own = request.POST.get("opening") == "own"
    text = request.POST.get("own_text", "")
    try:
        opening_submit(participant=participant, own_text=text if own else None)
    except STALE:
        pass
    except AnswerRejected as rejected:
        return opening_get(request, participant, error=str(rejected), own_text=text, status=rejected.status)
    reply = pending_reply(_conversation(participant)) if own else None
    if reply is not None:  # their own situation is their first message: checked now, after its commit
        participant_message_settle(reply)
    return _to_step(participant)


# --- conversation ------------------------------------------------------------------------------------------


def _transcript(conversation: Conversation) -> list[Turn]:
    return list(conversation.turns.exclude(status=Turn.Status.PENDING).order_by("index"))


def talk_get(request, participant, *, error: str = "", draft: str = "", status: int = 200):
    conversation = _conversation(participant)
    settings = chat_settings(participant.study)
    if conversation.crisis_open:
        return crisis_get(request, participant, conversation, status=status)
    turns = _transcript(conversation)
    for turn in turns:
        if turn.role == Turn.Role.RESPONDER and turn.shown_at is None:
            reply_shown(turn)
    sent = participant_turns(conversation)
    return _page(
        request,
        participant,
        "chat_talk.html",
        status=status,
        conversation=conversation,
        turns=turns,
        label_text=LABEL_TEXT[conversation.label],
        partner=_partner(conversation),
        awaiting=conversation.state == Conversation.State.AWAITING,
        can_send=conversation.state == Conversation.State.OPEN and sent < settings.max_turns,
        can_finish=conversation.state == Conversation.State.ENDED
        or (conversation.state == Conversation.State.OPEN and sent >= settings.min_turns),
        sent=sent,
        remaining=max(settings.max_turns - sent, 0),
        error=error,
        draft=draft,
    )


def _partner(conversation: Conversation) -> str:
    return {Label.AI: "The AI", Label.PERSON: "The person"}.get(conversation.label, "Your partner")


def talk_post(request, participant):
    action = request.POST.get("action", "send")
    streams = STREAM_TYPE in request.headers.get("Accept", "")
    if action in ("finish", "crisis_end"):
        try:
            conversation_end(participant=participant, crisis=action == "crisis_end")
        except STALE:
            pass
        except (AnswerRejected, ConversationClosed) as rejected:
            return talk_get(request, participant, error=str(rejected), status=400)
        return _to_step(participant)
    conversation = _conversation(participant)
    if action == "crisis_continue":
        crisis_resume(conversation)
        return _to_step(participant)
    reply = None
    if action == "send":
        text = request.POST.get("message", "")
        try:
            reply = participant_turn_store(conversation, text)
        except MessageInvalid as invalid:
            if streams:
                return _stream_refused(str(invalid))
            return talk_get(request, participant, error=str(invalid), draft=text, status=400)
        except ConversationClosed:
            reply = None  # a double post or a second tab: the pending reply, if any, is the one to show
    reply = reply or pending_reply(conversation)
    if reply is None or participant_message_settle(reply):  # none to produce, or the resources come first
        return _stream_refused("", go=True) if streams else _to_step(participant)
    if streams:
        response = StreamingHttpResponse(reply_lines(request, reply), content_type=STREAM_TYPE)
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # nginx: pass the lines on as they come
        return response
    if not connection.in_atomic_block:  # the plain post (no JavaScript): the reply is made here
        for _ in reply_events(reply):
            pass
    return _to_step(participant)


def _stream_refused(text: str, go: bool = False) -> HttpResponse:
    body = json.dumps({"refused": text} if not go else {"go": True}) + "\n"
    return HttpResponse(body, content_type=STREAM_TYPE, status=400 if text else 200)


def crisis_get(request, participant, conversation: Conversation, *, status: int = 200) -> HttpResponse:
    """The support resources, shown after a message that named a crisis and before any reply to it: the
    study's resources, then the participant's choice (back to the conversation, or end it and go on)."""
    settings = chat_settings(participant.study)
    resources = [line.strip() for line in settings.support_resources.splitlines() if line.strip()]
    return _page(
        request,
        participant,
        "chat_crisis.html",
        status=status,
        conversation=conversation,
        resources=resources,
    )


# --- rating ------------------------------------------------------------------------------------------------


def _scale(settings: ChatSettings) -> list[dict]:
    return [o for o in settings.scale if isinstance(o, dict) and "value" in o]


def rate_get(request, participant, *, posted=None, error: str = "", status: int = 200):
    settings = chat_settings(participant.study)
    texts = {key: text for key, _, text in PETS_ITEMS}
    posted = posted or {}
    items = [
        {"key": key, "text": texts[key], "value": posted.get(key, 50), "number": n}
        for n, key in enumerate(pets_order(participant.seed), start=1)
    ]
    return _page(
        request,
        participant,
        "chat_rate.html",
        status=status,
        items=items,
        scale=_scale(settings),
        chosen=posted.get("scale"),
        free_text=posted.get("free_text", ""),
        error=error,
        shown_at=int(time.time() * 1000),
        min=MIN,
        max=MAX,
    )


def rate_post(request, participant):
    post = request.POST
    posted: dict = {"free_text": post.get("free_text", "")}
    try:
        for key in KEYS:
            posted[key] = int(post.get(f"pets_{key}", ""))
        posted["scale"] = int(post.get("scale", ""))
    except ValueError:
        return rate_get(
            request, participant, posted=posted, error="Please answer every question.", status=400
        )
    try:
        shown = int(post.get("shown_at", ""))
        elapsed = max(0, int(time.time() * 1000) - shown)
    except ValueError:
        elapsed = None
    try:
        rating_submit(
            participant=participant,
            pets={k: posted[k] for k in KEYS},
            order=pets_order(participant.seed),
            scale_value=posted["scale"],
            free_text=posted["free_text"],
            response_time_ms=elapsed,
        )
    except STALE:
        pass
    except AnswerRejected as rejected:
        return rate_get(request, participant, posted=posted, error=str(rejected), status=rejected.status)
    return _to_step(participant)


# --- debrief -----------------------------------------------------------------------------------------------


def debrief_get(request, participant):
    conversation = _conversation(participant)
    return _page(request, participant, "chat_debrief.html", conversation=conversation)


def debrief_post(request, participant):
    try:
        debrief_read(participant=participant, now=timezone.now())
    except STALE:
        pass
    return _to_step(participant)


OPENING_PAGE = StepPage(get=opening_get, post=opening_post)
TALK_PAGE = StepPage(get=talk_get, post=talk_post)
RATE_PAGE = StepPage(get=rate_get, post=rate_post)
DEBRIEF_PAGE = StepPage(get=debrief_get, post=debrief_post)
