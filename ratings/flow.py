"""How the participant pages dispatch: the step page `/s/<slug>/step/` shows the participant's current step.

The sequence of steps and the lifecycle belong to the spine (studies/participants.py, studies/kinds/): consent,
the study kind's steps, done. Each step is served by a page: an object with `get` (show the page) and `post`
(store an answer through a service, then redirect back to the step page), named by the kind's `pages`
(`StudyKind.pages`, dotted paths such as "kinds.pairwise.pages.PAIRS_PAGE", resolved by the registry) — so this
app never names a kind or a kind's step, and a new kind adds its pages in its own package.

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
from studies.kinds import DONE, page_for, participant_steps, step_after
from studies.models import Participant
from studies.pages import StepPage
from studies.participants import participant_advance, participant_screen_out


def page_of(participant: Participant) -> StepPage:
    """The page serving the participant's current step (LookupError when no kind's page does)."""
    return page_for(participant.study, participant.step)


def carried_ahead(study) -> tuple[str, StepPage] | None:
    """The step that follows the study's instructions and its page, when that page carries itself ahead on the
    consent page (`StepPage.ahead`, e.g. the rating kind's first item: shared_pages.consent_page), so the first
    answer takes the instructions with it (`steps_on_the_way`); None otherwise."""
    if Participant.Step.INSTRUCTIONS not in participant_steps(study):
        return None
    following = step_after(study, Participant.Step.INSTRUCTIONS)
    if following == DONE:
        return None
    page = page_for(study, following)
    return (following, page) if page.ahead is not None else None


def consent_accept(*, participant: Participant, now: datetime | None = None) -> bool:
    """The participant agrees: they move on from the consent step. Idempotent (False when already past it)."""
    return participant_advance(participant=participant, from_step=Participant.Step.CONSENT, now=now)


def consent_decline(*, participant: Participant, now: datetime | None = None) -> bool:
    """The participant does not agree: screened out (see `studies.participants.participant_screen_out`)."""
    return participant_screen_out(participant=participant, now=now)


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
    ahead = carried_ahead(participant.study) if post.get("begun") == "1" else None
    # With an answer; or with the instructions' own fields, sent as the page was left before that answer.
    begun = post.get("begun") == "1" and (
        step == Participant.Step.INSTRUCTIONS or (ahead is not None and step == ahead[0])
    )
    if (
        post.get("agreed") == "1"
        and (step == Participant.Step.INSTRUCTIONS or begun)
        and participant.step == Participant.Step.CONSENT
    ):
        consent_accept(participant=participant)
    if begun and ahead is not None and participant.step == Participant.Step.INSTRUCTIONS:
        now = timezone.now()
        # One commit for both: a page of the items read between them (the refresh that follows a page left
        # before its first answer, whose beacon this is) would mark the item shown at its own time.
        with transaction.atomic():
            if participant_advance(participant=participant, from_step=Participant.Step.INSTRUCTIONS, now=now):
                ahead[1].ahead_shown(participant=participant, now=shown_before(post, participant, now))


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
