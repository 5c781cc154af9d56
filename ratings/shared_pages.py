"""The participant pages every kind's participants see alike — the consent form and the instructions — rendered
once per worker process and then served from memory (studies.pages.shared_page).

The entry (the consent page of a newcomer) is the one request a participant with JavaScript makes before their
first answer: with JavaScript, the consent page also carries the instructions page and, where the step after
them carries itself ahead (`StepPage.ahead`: the rating kind's first item), what that step's page gives:
agreeing shows the instructions and "continue" the next page without a request, and the first answer then posts
all three (see static/ratings/participant.js, and flow.steps_on_the_way).
"""

from __future__ import annotations

import copy

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.urls import reverse
from django.utils.html import json_script

from config.ratelimit import honeypot_add
from studies.kinds import step_after
from studies.models import Participant
from studies.pages import CACHE_ALIAS, TOKEN_MARK, page_key, page_text, shared_page

from .flow import carried_ahead
from .selectors import worked_examples


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
        f"{page_key('consent.html', participant, **consent)}"
        f"+{page_key('instructions.html', ahead, **instructions)}+{hold}"
    )
    cache = caches[CACHE_ALIAS]
    carrying = cache.get(key)
    if carrying is None:
        carried = HttpResponse(page_text(request, "instructions.html", ahead, **instructions))
        honeypot_add(carried)  # as the consent's reply in place would carry it
        data = {
            "page": carried.content.decode(),
            "url": reverse("ratings:step", kwargs={"slug": study.slug}),
            "hold": hold,
        }
        # json_script escapes <, > and &: the carried page's forms are not the honeypot's or the parser's; the
        # token's mark is letters and digits, so it comes through to be replaced with the consent page's.
        page = page_text(request, "consent.html", participant, **consent)
        carrying = page.replace("</body>", json_script(data, "next-step") + "</body>", 1)
        cache.set(key, carrying)
    page = carrying.replace(TOKEN_MARK, get_token(request))
    following = carried_ahead(study)  # the step after the instructions, when its page carries itself ahead
    if following is not None:
        step, carried_page = following
        at_next = copy.copy(ahead)
        at_next.step = step
        first = carried_page.ahead(request, at_next)
        if first is not None:
            page = page.replace("</body>", json_script(first, "first-item") + "</body>", 1)
    return HttpResponse(page)
