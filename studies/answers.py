"""The one answer protocol: how every kind's answer is taken, exactly once.

A kind's answer service locks the participant's row (`participants.participant_lock`), lists the participant's
answer pages (`Page`: its position, the step it is answered on, whether it is answered, whether it carries an
attention check) and hands them to `answer_take` with the function that writes the kind's own answer. The
protocol, the same for every kind:

1. find the page among the participant's own (`NotYourItem` otherwise: a forged or tampered form);
2. a page already answered stores nothing and is no error (`created=False`): a double click, a second tab, a
   replayed form; the stored answer stands;
3. only the participant's current page, the first unanswered one, is answered (`NotCurrentItem`), and only
   while they are active on its step (`ParticipantNotActive`): a stale page stores nothing;
4. the kind writes its answer (`store(page)`, which says whether the page's attention check failed);
5. the participant is touched (`last_seen_at`, at most once per `TOUCH_INTERVAL`);
6. a failed attention check is counted (`attention_failure_record`: every kind's checks count alike, one reason
   text);
7. the step's last page moves the participant on (`participant_mark_next`: the next step, or completed with the
   code their outcome earns).

All of it in the caller's transaction, under the lock, with one save of the participant's changed fields: two
tabs, a double click or a replayed form can never store an answer twice or move a participant twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from .models import Participant
from .participants import TOUCH_INTERVAL, is_on_step, participant_mark_next

ATTENTION_REASON_PREFIX = "attention checks failed"


class AnswerRejected(Exception):
    """The answer was not stored. `status` is the HTTP status a page should answer with."""

    status = 400


class NotYourItem(AnswerRejected):
    """The participant has no page at that position (a forged or tampered form)."""

    status = 403


class InvalidValue(AnswerRejected):
    status = 400


class NotCurrentItem(AnswerRejected):
    """An unanswered page that is not the participant's current one (answering ahead). Nothing stored; the
    page redirects to the current one."""

    status = 409


class ParticipantNotActive(AnswerRejected):
    """The participant is no longer active on the page's step (a stale page). Nothing stored."""

    status = 409


STALE = (NotCurrentItem, ParticipantNotActive)  # a stale page: nothing stored, the current step is shown


@dataclass(frozen=True)
class Page:
    """One of a participant's answer pages, as the protocol needs it."""

    position: int
    step: str  # the participant step it is answered on
    answered: bool
    check: bool = False  # it carries an attention check


@dataclass(frozen=True)
class Taken:
    page: Page
    created: bool  # False: the page was answered before and nothing was stored now
    completed: bool  # the participant is finished (now or before)
    following: Page | None = None  # the next unanswered page on the same step, after a new answer


def answer_take(
    locked: Participant,
    *,
    pages: Sequence[Page],
    position: int,
    now: datetime,
    store: Callable[[Page], bool],
) -> Taken:
    """Takes the answer to the page at `position` of a locked participant (see the module's docstring), inside
    the transaction holding the lock. `pages`: all of the participant's answer pages, in order. `store(page)`
    writes the kind's answer (it may raise `AnswerRejected`, rolling the transaction back) and returns True
    when the page's attention check was failed."""
    page = next((p for p in pages if p.position == position), None)
    if page is None:
        raise NotYourItem(f"There is no page at position {position} for this participant.")
    if page.answered:
        return Taken(page, created=False, completed=locked.status != Participant.Status.ACTIVE)
    unanswered = [p for p in pages if not p.answered]
    if unanswered[0].position != position:
        raise NotCurrentItem(f"Page {position} is not the current page ({unanswered[0].position}).")
    if not is_on_step(locked, page.step):
        raise ParticipantNotActive(f"The participant is {locked.status} on step {locked.step}.")
    failed = store(page)
    fields = []
    if locked.last_seen_at is None or now - locked.last_seen_at >= TOUCH_INTERVAL:
        locked.last_seen_at = now
        fields.append("last_seen_at")
    if failed:
        fields += attention_failure_record(locked, checks=sum(1 for p in pages if p.check))
    following = unanswered[1] if len(unanswered) > 1 and unanswered[1].step == page.step else None
    if following is None:
        fields += participant_mark_next(locked, page.step, now)
    if fields:
        locked.save(update_fields=list(dict.fromkeys(fields)))
    return Taken(
        page, created=True, completed=locked.status == Participant.Status.COMPLETED, following=following
    )


def attention_failure_record(locked: Participant, *, checks: int) -> list[str]:
    """One more failed attention check of a locked participant (every kind's checks count alike): counted, and
    beyond `study.attention_check_max_failures` the participant is flagged for exclusion with the reason
    ("attention checks failed: 2 of 3", `checks` being how many they were given), which replaces an earlier
    one. Returns the changed fields; the caller saves them in its answer's transaction."""
    locked.attention_failures += 1
    fields = ["attention_failures"]
    if locked.attention_failures > locked.study.attention_check_max_failures:
        reasons = [r for r in locked.exclusion_reasons or [] if not r.startswith(ATTENTION_REASON_PREFIX)]
        reasons.append(f"{ATTENTION_REASON_PREFIX}: {locked.attention_failures} of {checks}")
        locked.flagged_for_exclusion = True
        locked.exclusion_reasons = reasons
        fields += ["flagged_for_exclusion", "exclusion_reasons"]
    return fields
