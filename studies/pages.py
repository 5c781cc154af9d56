"""A participant step's page (`StepPage`): what a kind names for each of its steps (`StudyKind.pages`), and the
participant front (ratings/flow.py, ratings/views.py) serves at `/s/<slug>/step/`; and what every kind's pages
share: the "Step 2 of 4" (`step_progress`), and pages rendered once per worker process (`shared_page`).

A page that every participant sees alike at a step depends only on what the study shows (its title, texts,
worked examples), on where the participant is (their step and its "Step 2 of 4"), on whether they are a staff
preview, and on the CSRF token of the request. It is cached under a digest of everything but the token, so an
edit in the admin changes the digest and the next request renders the edited page: nothing has to be
invalidated, and old pages age out of the bounded cache (`CACHES["participant-pages"]`, in the process's
memory). The token goes into the cached page per request (`get_token`, which also sets the CSRF cookie as the
template tag would). Rendering a page is ~2 ms of a worker's CPU (bench/request_costs.py); a served copy is a
digest and a string replacement.

A handler is `(request, participant) -> HttpResponse`; the front has already checked that the participant belongs
to the session, is active, and (for POST) that the form was posted from this step (the hidden `step` field), so
handlers only deal with their own page.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from django.core.cache import caches
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.template.loader import render_to_string

from .kinds import participant_steps
from .kinds.base import DONE
from .models import Participant

Handler = Callable[[HttpRequest, Participant], HttpResponse]


@dataclass(frozen=True)
class StepPage:
    """`answer`, when a page has one, answers a background POST of the page's form (`Accept:
    application/json`, sent by static/ratings/participant.js) with a small JSON document instead of a
    redirect: what replaces the page in place, or where the browser goes next (None: the participant left the
    step, and the front replies with their new step's page). Pages without it get the page of the
    participant's step after the plain post, in place.

    `in_place`: the reply in place for a participant who has just arrived at this step, when the page has a
    lighter one than itself rendered (None from it: the page itself). `ahead`: what the consent page carries
    for this step when it follows the instructions (the participant given as they will be on this step; a
    dict for participant.js's `#first-item`, None: nothing), and `ahead_shown(participant=, now=)` marks what it
    carried as shown when the page says it showed it (its first answer comes with `begun=1`)."""

    get: Handler
    post: Handler
    answer: Callable[[HttpRequest, Participant], JsonResponse | None] | None = None
    in_place: Callable[[HttpRequest, Participant], JsonResponse | None] | None = None
    ahead: Callable[[HttpRequest, Participant], dict | None] | None = None
    ahead_shown: Callable[..., None] | None = None  # (*, participant, now)


def step_progress(participant) -> dict:
    """The "Step 2 of 4" of the participant's current step, from their study's sequence of steps; nothing
    when the step is not in it (a preview of a retired step, say)."""
    if participant is None:
        return {}
    steps = [step for step in participant_steps(participant.study) if step != DONE]
    try:
        number = steps.index(participant.step) + 1
    except ValueError:
        return {}
    return {"number": number, "total": len(steps)}


CACHE_ALIAS = "participant-pages"
# What the page is rendered with in place of the token: alphanumeric, so no escaping changes it, and drawn per
# process, so no study text can contain it.
TOKEN_MARK = f"csrf{secrets.token_hex(16)}"


def shared_page(request: HttpRequest, template: str, participant, *, shows: tuple, **context) -> HttpResponse:
    """`template` rendered for `participant` at their step (as `ratings.views._page` renders it, with `step`),
    from the cache when an identical page was rendered before. `shows` lists everything of the study the
    template shows beyond its title and slug (the consent text; the instructions); the participant's step,
    progress, status and preview flag, and `context`, are part of the cache key too."""
    page = page_text(request, template, participant, shows=shows, **context)
    return HttpResponse(page.replace(TOKEN_MARK, get_token(request)))


def page_key(template: str, participant, *, shows: tuple, **context) -> str:
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


def page_text(request: HttpRequest, template: str, participant, *, shows: tuple, **context) -> str:
    """`shared_page`'s page with `TOKEN_MARK` for its CSRF token, from the cache or rendered into it."""
    key = page_key(template, participant, shows=shows, **context)
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
                "csrf_token": TOKEN_MARK,
            },
            request=request,
        )
        cache.set(key, page)
    return page
