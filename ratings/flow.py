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

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from studies import authenticity
from studies.kinds import page_for, step_after
from studies.models import Participant
from studies.pages import StepPage
from studies.participants import participant_advance

from . import services


def page_of(participant: Participant) -> StepPage:
    """The page serving the participant's current step (LookupError when no kind's page does)."""
    return page_for(participant.study, participant.step)


def items_follow_instructions(study) -> bool:
    """Whether the study's instructions lead straight to its items: then the consent page carries the first item
    too (shared_pages.consent_page) and the first answer takes the instructions with it (`steps_on_the_way`)."""
    return step_after(study, Participant.Step.INSTRUCTIONS) == Participant.Step.ITEMS


# The longest time the page may say the first item was on screen before its answer (`shown_ms`).
SHOWN_MS_MAX = 60 * 60 * 1000


def shown_ms(post) -> int:
    """How long the page says it showed the first item it carried ahead (`shown_ms`), from 0 to
    `SHOWN_MS_MAX`; 0 when it says nothing."""
    try:
        shown = int(post.get("shown_ms", ""))
    except ValueError:
        return 0
    return min(max(shown, 0), SHOWN_MS_MAX)


def shown_before(post, participant: Participant, now: datetime) -> datetime:
    """When the page showed the first item it carried ahead: `shown_ms` before `now`, no earlier than the
    participant's enrolment."""
    return max(now - timedelta(milliseconds=shown_ms(post)), participant.started_at)


def steps_on_the_way(request: HttpRequest, participant: Participant) -> None:
    """The steps the page took without a request, taken first, as their own forms take them:

    * `agreed=1`: participant.js showed the instructions when the consent was agreed to (the consent page
      carries them: shared_pages.consent_page); the consent is taken when the instructions' form, or the
      first answer, comes with it, for a participant still on the consent step;
    * `begun=1` on an answer: the page showed the first item when the instructions were done (the consent page
      carries it too); the instructions are left and the first item marked as shown when the page says it
      showed it (`shown_before`), for a participant still on the instructions step. The instructions' own
      form with `begun=1` (the page left before the first answer) takes them the same way, and nothing else.

    Each is taken only from its own step, so a repeated post (a retry, another tab) takes nothing twice."""
    post = request.POST
    if participant.status != Participant.Status.ACTIVE:
        return
    step = post.get("step")
    # With an answer; or with the instructions' own fields, sent as the page was left before that answer.
    begun = step in (Participant.Step.INSTRUCTIONS, Participant.Step.ITEMS) and post.get("begun") == "1"
    if (
        post.get("agreed") == "1"
        and (step == Participant.Step.INSTRUCTIONS or begun)
        and participant.step == Participant.Step.CONSENT
    ):
        services.consent_accept(participant=participant)
    if (
        begun
        and participant.step == Participant.Step.INSTRUCTIONS
        and items_follow_instructions(participant.study)
    ):
        now = timezone.now()
        if participant_advance(participant=participant, from_step=Participant.Step.INSTRUCTIONS, now=now):
            services.item_mark_shown(participant=participant, now=shown_before(post, participant, now))


@contextmanager
def signals_kept(request: HttpRequest, participant: Participant) -> Iterator[None]:
    """Keeps what the current step's form reported about how it was answered (static/ratings/signals.js's
    `sig` field, the hidden instruction's field) with the participant, whatever the kind, in one transaction
    with what the block stores (the step's own post: the answer). One commit for both: the signals cost the
    answer two statements (authenticity.signals_record), and are stored with it or not at all. A form that
    reported nothing opens no transaction here. Malformed signals are dropped, never an error."""
    post = request.POST
    raw, trap_value = post.get(authenticity.SIGNALS_FIELD), post.get(authenticity.TRAP_FIELD)
    if not raw and not trap_value:
        yield
        return
    try:
        position = int(post.get("position", ""))
    except ValueError:
        position = None
    with transaction.atomic():
        authenticity.signals_record(
            participant=participant,
            step=participant.step,
            position=position,
            raw=raw,
            user_agent=request.headers.get("User-Agent", ""),
            trap_value=trap_value,
        )
        yield
