"""How the participant pages dispatch: the step page `/s/<slug>/step/` shows the participant's current step.

The sequence of steps and the lifecycle belong to the spine (studies/participants.py, studies/kinds/): consent,
the study kind's steps, done. Each step is served by a page: an object with `get` (show the page) and `post`
(store an answer through a service, then redirect back to the step page), named by the kind's `pages`
(`StudyKind.pages`, dotted paths such as "ratings.views.ITEMS_PAGE") — so studies/ never imports this app,
and a new kind adds its pages in its own module without touching another kind's.

A handler is `(request, participant) -> HttpResponse`; the view has already checked that the participant
belongs to the session, is active, and (for POST) that the form was posted from this step (the hidden `step`
field), so handlers only deal with their own page. Entry, consent, the outcome pages (completed, screened out,
returned, timed out) and the stop-and-return page are shared by every kind. A step is left only through
`studies.participants.participant_advance` (or an answer service that calls it), a conditional UPDATE — so a
second submit of an old page finds the participant elsewhere and is a no-op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse

from studies.kinds import page_for
from studies.models import Participant

from . import services

Handler = Callable[[HttpRequest, Participant], HttpResponse]


@dataclass(frozen=True)
class StepPage:
    """`answer`, when a page has one, answers a background POST of the page's form (`Accept:
    application/json`, sent by static/ratings/participant.js) with a small JSON document instead of a
    redirect: what replaces the page in place, or where the browser goes next. Pages without it get
    `{"next": <the step page>}` for such a POST, and nothing is stored."""

    get: Handler
    post: Handler
    answer: Handler | None = None


def page_of(participant: Participant) -> StepPage:
    """The page serving the participant's current step (LookupError when no kind's page does)."""
    return page_for(participant.study, participant.step)


def consent_on_the_way(request: HttpRequest, participant: Participant) -> None:
    """The instructions posted with `agreed=1` (participant.js showed them, without a request, when the
    consent was agreed to: shared_pages.consent_page) by a participant still on the consent step: the consent
    is taken first, as its own form takes it, and the instructions then as theirs."""
    if (
        request.POST.get("agreed") == "1"
        and request.POST.get("step") == Participant.Step.INSTRUCTIONS
        and participant.status == Participant.Status.ACTIVE
        and participant.step == Participant.Step.CONSENT
    ):
        services.consent_accept(participant=participant)
