"""The human-responder console's pages (kinds/chat/console.py does the work): the queue of a study's waiting
person-source replies, the replies the responder holds with each conversation so far and the seconds left, a
reply form per held reply, and buttons to take the next one or give one back. Works as plain form posts (the
page says to refresh; each post redirects back to it); with JavaScript (static/chat/console.js) the queue count
and the seconds left update themselves from `status.json` every few seconds and the page reloads when a reply
arrives in the queue or a held one is no longer theirs to answer."""

from __future__ import annotations

from functools import wraps

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from studies.models import Study

from .console import ConsoleError, claim_next, claim_release, held_by, may_respond, queue_length, reply_send
from .models import ChatSettings


def responder_required(view):
    """Anonymous → the login page (then back); signed in without the responder role → 403."""

    @wraps(view)
    def wrapper(request, slug, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), login_url=reverse("analysis:login"))
        if not may_respond(request.user):
            raise PermissionDenied("The responder console is open to staff in the Responders group.")
        study = Study.objects.filter(slug=slug).first()
        if study is None or not ChatSettings.objects.filter(study=study).exists():
            raise Http404("No chat study with this address.")
        return view(request, study, *args, **kwargs)

    return wrapper


def _back(study: Study) -> HttpResponse:
    return redirect("analysis:chat_console", study.slug)


@require_GET
@responder_required
def console_page(request: HttpRequest, study: Study) -> HttpResponse:
    held = held_by(study, request.user)
    return render(
        request,
        "chat/console.html",
        {
            "study": study,
            "held": held,
            "waiting": queue_length(study),
            "drafts": request.session.get("console_drafts", {}),
        },
    )


@require_GET
@responder_required
def console_status(request: HttpRequest, study: Study) -> JsonResponse:
    held = held_by(study, request.user)
    return JsonResponse(
        {"waiting": queue_length(study), "held": {str(h.turn.pk): h.seconds_left for h in held}},
        headers={"Cache-Control": "no-store"},
    )


@require_POST
@responder_required
def console_take(request: HttpRequest, study: Study) -> HttpResponse:
    try:
        turn = claim_next(study, request.user)
    except ConsoleError as exc:
        messages.error(request, str(exc))
        return _back(study)
    if turn is None:
        messages.info(request, "No conversation is waiting for a person right now.")
    return _back(study)


@require_POST
@responder_required
def console_reply(request: HttpRequest, study: Study) -> HttpResponse:
    turn_id, text = request.POST.get("turn", ""), request.POST.get("text", "")
    try:
        reply_send(study, request.user, int(turn_id) if turn_id.isdigit() else 0, text)
    except ConsoleError as exc:
        messages.error(request, str(exc))
        request.session["console_drafts"] = {**request.session.get("console_drafts", {}), turn_id: text}
        return _back(study)
    drafts = request.session.get("console_drafts", {})
    drafts.pop(turn_id, None)
    request.session["console_drafts"] = drafts
    messages.success(request, "Your reply was sent.")
    return _back(study)


@require_POST
@responder_required
def console_release(request: HttpRequest, study: Study) -> HttpResponse:
    turn_id = request.POST.get("turn", "")
    try:
        claim_release(study, request.user, int(turn_id) if turn_id.isdigit() else 0)
    except ConsoleError as exc:
        messages.error(request, str(exc))
        return _back(study)
    messages.info(request, "The conversation went back to the queue.")
    return _back(study)
