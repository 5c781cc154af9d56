"""Participant pages that every participant of a study sees alike at a step — the consent form and the
instructions — rendered once per worker process and then served from memory.

Such a page depends only on what the study shows (its title, texts, worked examples), on where the
participant is (their step and its "Step 2 of 4"), on whether they are a staff preview, and on the CSRF
token of the request. The page is cached under a digest of everything but the token, so an edit in the admin
changes the digest and the next request renders the edited page: nothing has to be invalidated, and old
pages age out of the bounded cache (`CACHES["participant-pages"]`, in the process's memory). The token goes
into the cached page per request (`get_token`, which also sets the CSRF cookie as the template tag would).

Rendering a page is ~2 ms of a worker's CPU (bench/request_costs.py); a served copy is a digest and a string
replacement. The entry (the consent page of a newcomer) is the one request a participant with JavaScript makes
before their first answer.

With JavaScript, the consent page also carries the instructions page and, where they lead to the items, the
participant's first item (`consent_page`): agreeing shows the instructions and "continue" the item without a
request, and the first answer then posts all three (see static/ratings/participant.js).

The item page is shared the same way when it comes in a reply in place (the instructions', or the TEQ's):
its shell — the page with the item's texts left out — is the same for every participant at the same item
number, and the reply carries the item itself, which static/ratings/participant.js fills in as it does
after every answer (`item_in_place`).
"""

from __future__ import annotations

import copy
import hashlib
import secrets
from types import SimpleNamespace

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.crypto import salted_hmac
from django.utils.html import json_script

from config.ratelimit import honeypot_add
from ratings.templatetags.participant_pages import step_progress
from studies.kinds import step_after
from studies.models import Participant

from .flow import items_follow_instructions
from .selectors import (
    CurrentItem,
    assignment_current_for_participant,
    item_disguise_attention_check,
    item_payload,
    scale_buttons,
    worked_examples,
)

CACHE_ALIAS = "participant-pages"
# What the page is rendered with in place of the token: alphanumeric, so no escaping changes it, and drawn per
# process, so no study text can contain it.
_TOKEN_MARK = f"csrf{secrets.token_hex(16)}"


def shared_page(request: HttpRequest, template: str, participant, *, shows: tuple, **context) -> HttpResponse:
    """`template` rendered for `participant` at their step (as `ratings.views._page` renders it, with `step`),
    from the cache when an identical page was rendered before. `shows` lists everything of the study the
    template shows beyond its title and slug (the consent text; the instructions); the participant's step,
    progress, status and preview flag, and `context`, are part of the cache key too."""
    page = _page_text(request, template, participant, shows=shows, **context)
    return HttpResponse(page.replace(_TOKEN_MARK, get_token(request)))


def _page_key(template: str, participant, *, shows: tuple, **context) -> str:
    """The cache key of `shared_page`'s page."""
    study = participant.study
    return hashlib.sha256(
        repr(
            (
                template,
                study.pk,
                study.title,
                study.slug,
                study.trap_hidden_instruction,
                shows,
                # As plain strings: a participant just enrolled holds the choices' members, one read back their values.
                str(participant.status),
                participant.is_preview,
                step_progress(participant),
                sorted({**context, "step": str(participant.step)}.items()),
            )
        ).encode()
    ).hexdigest()


def _page_text(request: HttpRequest, template: str, participant, *, shows: tuple, **context) -> str:
    """`shared_page`'s page with `_TOKEN_MARK` for its CSRF token, from the cache or rendered into it."""
    key = _page_key(template, participant, shows=shows, **context)
    cache = caches[CACHE_ALIAS]
    page = cache.get(key)
    if page is None:
        page = render_to_string(
            f"ratings/{template}",
            {
                **context,
                "step": participant.step,
                "study": participant.study,
                "participant": participant,
                "csrf_token": _TOKEN_MARK,
            },
            request=request,
        )
        cache.set(key, page)
    return page


def item_in_place(request: HttpRequest, participant, item: CurrentItem) -> JsonResponse:
    """The reply in place that takes `participant` to their item `item` (already shown and disguised as
    their page shows it): `{"page": the item page's shell, "url": the step page, "item": the item}`, the
    item as an answer's reply carries it (`item_payload`). The shell is the item page with the texts left out
    (`shared_page`), the same for everyone at this item number; the script shows the page, then the item."""
    return JsonResponse(_item_in_place_data(request, participant, item))


def _item_in_place_data(request: HttpRequest, participant, item: CurrentItem) -> dict:
    study = participant.study
    # Plain values: the cache key is made of their repr (a model instance's shows its relations).
    blank = SimpleNamespace(number=item.number, total=item.total, answered=item.answered)
    blank.emotion = blank.situation = blank.utterance = blank.response = ""
    shell = shared_page(
        request,
        "item.html",
        participant,
        shows=(study.scale_question, study.scale),
        item=blank,
        page=SimpleNamespace(position=item.assignment.position),
        scale=scale_buttons(study),
    )
    honeypot_add(shell)
    return {
        "page": shell.content.decode(),
        "url": reverse("ratings:step", kwargs={"slug": study.slug}),
        "item": item_payload(item, title=study.title),
    }


def instructions_page(request: HttpRequest, participant) -> HttpResponse:
    """The instructions page of `participant` (at the instructions step)."""
    return shared_page(request, "instructions.html", participant, **_instructions_context(participant.study))


def _instructions_context(study) -> dict:
    return {"shows": (study.instructions_text,), "examples": worked_examples(study)}


def consent_page(request: HttpRequest, participant) -> HttpResponse:
    """The consent page of `participant`; where their next step is the instructions, the page also carries the
    instructions page, for participant.js to show when they agree (no request), in a JSON script element
    (`#next-step`: `{"page": html, "url": the step page, "hold": seconds}`), which a browser without
    JavaScript ignores. The instructions' button then posts `agreed=1` with its own fields, and the server
    takes the consent and the instructions together. `hold` is PARTICIPANT_CONSENT_HOLD_MINUTES: the script
    posts the consent on its own before the participant's place would stop being held, and when the page is
    hidden or left (studies/balancing.py `holding`). The page with what it carries is cached as one."""
    study = participant.study
    consent = {"shows": (study.consent_text,)}
    if (
        participant.status != Participant.Status.ACTIVE
        or participant.step != Participant.Step.CONSENT
        or step_after(study, Participant.Step.CONSENT) != Participant.Step.INSTRUCTIONS
    ):
        return shared_page(request, "consent.html", participant, **consent)
    ahead = copy.copy(participant)
    ahead.step = Participant.Step.INSTRUCTIONS
    instructions = _instructions_context(study)
    hold = settings.PARTICIPANT_CONSENT_HOLD_MINUTES * 60
    key = (
        f"{_page_key('consent.html', participant, **consent)}"
        f"+{_page_key('instructions.html', ahead, **instructions)}+{hold}"
    )
    cache = caches[CACHE_ALIAS]
    carrying = cache.get(key)
    if carrying is None:
        carried = HttpResponse(_page_text(request, "instructions.html", ahead, **instructions))
        honeypot_add(carried)  # as the consent's reply in place would carry it
        data = {
            "page": carried.content.decode(),
            "url": reverse("ratings:step", kwargs={"slug": study.slug}),
            "hold": hold,
        }
        # json_script escapes <, > and &: the carried page's forms are not the honeypot's or the parser's; the
        # token's mark is letters and digits, so it comes through to be replaced with the consent page's.
        page = _page_text(request, "consent.html", participant, **consent)
        carrying = page.replace("</body>", json_script(data, "next-step") + "</body>", 1)
        cache.set(key, carrying)
    page = carrying.replace(_TOKEN_MARK, get_token(request))
    if items_follow_instructions(study):
        first = _first_item_ahead(request, ahead)
        if first is not None:
            page = page.replace("</body>", json_script(first, "first-item") + "</body>", 1)
    return HttpResponse(page)


def _first_item_ahead(request: HttpRequest, at_instructions) -> dict | None:
    """What the instructions' reply in place would carry (`item_in_place`): the item page's shell and the
    participant's first item, for participant.js to show when the instructions are done, without a request;
    the first answer then takes the consent and the instructions with it (`begun=1`, flow.steps_on_the_way).
    Read, not marked as shown: the page says when it showed it (`shown_ms`)."""
    current = assignment_current_for_participant(participant=at_instructions)
    if current is None:
        return None
    at_items = copy.copy(at_instructions)
    at_items.step = Participant.Step.ITEMS
    item = item_disguise_attention_check(item=current, participant=at_items)
    # Whose item this is, for the tab that shows it to know it again after a refresh (participant.js).
    key = salted_hmac("ratings.first-item", f"{at_items.pk}:{current.assignment.pk}").hexdigest()[:20]
    return {**_item_in_place_data(request, at_items, item), "key": key}
