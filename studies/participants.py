"""The participant's state machine, in one place: enrol → the kind's steps → complete / return / time out /
screen out.

States (`Participant.status`): active → completed | returned | timed_out | screened_out (and `excluded`, set by
researchers). While active, `Participant.step` walks the study's sequence: consent, the kind's steps
(studies/kinds/), done. Every transition here is either

* a conditional UPDATE naming the state it expects (`participant_advance`, `participant_return`,
  `participant_touch`), so a replayed form, a double click or a second tab finds the participant elsewhere
  and changes nothing; or
* a check-then-write under the participant's row lock (`participant_lock`: one hand-written
  `SELECT ... FOR UPDATE` of that row only, studies/rows.py — it runs on every answer), for transitions that
  must read the participant before writing (completing, screening out, and the kinds' answer services,
  which write their answer and move the step in the same transaction).

Enrolment rules (the balancing of studies/balancing.py; what a participant is shown is the kind's policy):

* An arriving participant joins the enrolling condition of the study with the fewest participants counted as
  completed + active-and-not-stale, never beyond `condition.effective_quota`. A full study writes nothing
  and raises `StudyFull`.
* A participant who times out or returns gives back the slot (they stop being counted) and the items (their
  unanswered assignments are deleted).
* Staff previews (`is_preview=True`) are never counted, take no slot and do not move the item balance.

Two arrivals at the same instant are serialised by a row lock on the Study (see `participant_enroll`);
the same external id arriving twice is caught by the unique constraint on (study, external_id).
"""

from __future__ import annotations

import hashlib
import random
import secrets
from datetime import datetime, timedelta
from functools import cache

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from . import balance_counts, rows
from .authenticity_answers import answers_review
from .balancing import condition_choose, hold_cutoff, lapsed
from .enrolment_errors import (  # noqa: F401 (the enrolment's errors are raised, and imported, from here)
    AlreadyInFamily,
    EnrollmentError,
    InvalidExternalId,
    ParticipantCannotRestart,
    StudyBudgetSpent,
    StudyFull,
    StudyNotOpen,
)
from .kinds import DONE, kind_of, step_after
from .models import Participant, Study
from .waves import seen_in_family

EXTERNAL_ID_MAX_LENGTH = 128

# How fresh `last_seen_at` must already be for a request to skip writing it again. Staleness is judged in
# minutes (the study's time limit), so a few seconds' imprecision changes nothing, while a write on every
# page view of a launch is a row update per request. Answers write `last_seen_at` themselves.
TOUCH_INTERVAL = timedelta(seconds=20)

# The fields a transition may change, copied back onto the caller's instance after a locked write.
STATE_FIELDS = (
    "status",
    "step",
    "attention_failures",
    "flagged_for_exclusion",
    "exclusion_reasons",
    "completion_code",
    "finished_at",
    "last_seen_at",
    "teq_answers",
    "teq_score",
    "demographics",
)


# --- The participant's row --------------------------------------------------------------------------------


def participant_lock(participant: Participant) -> Participant:
    """The participant's row, locked (`FOR UPDATE`) until the surrounding transaction ends; call inside
    `transaction.atomic()`. Only that row, without a join: locking the study's row too would serialise every
    answer of the study (and every arrival, which locks it to enrol). The study comes from the participant
    already in hand. Hand-written (studies.rows): it runs on every answer."""
    row = rows.fetchone(_lock_sql(connection.vendor), [participant.pk])
    if row is None:
        raise Participant.DoesNotExist(f"Participant {participant.pk} does not exist.")
    locked, _ = rows.instance(Participant, row)
    locked.study = participant.study
    return locked


@cache
def _lock_sql(vendor: str) -> str:
    return (
        f"SELECT {rows.columns(Participant, 'p')} FROM {rows.table(Participant)} p"
        f" WHERE {rows.column(Participant, 'id', 'p')} = %s{rows.for_update()}"
    )


def participant_state_copy(target: Participant, source: Participant) -> None:
    """Copies the lifecycle fields of `source` (a locked, written row) onto `target` (the caller's instance)."""
    for field in STATE_FIELDS:
        setattr(target, field, getattr(source, field))


def is_on_step(locked: Participant, step: str) -> bool:
    return locked.status == Participant.Status.ACTIVE and locked.step == step


# --- Steps and finishing -------------------------------------------------------------------------------


def _completion_code(participant: Participant) -> str:
    study = participant.study
    if participant.flagged_for_exclusion:
        return study.failed_checks_code or study.completion_code
    return study.completion_code


def participant_mark_completed(locked: Participant, now: datetime) -> list[str]:
    """Sets a locked, active participant's fields to completed (status, step done, finished_at and the code
    their outcome earns: the failed-checks code when flagged for exclusion, else the completion code).
    Returns the changed fields; the caller saves them in its transaction (with its own answer, already written:
    what their answers show is read here once, for the authenticity score, `answers_review`)."""
    answers_review(locked)
    locked.status = Participant.Status.COMPLETED
    locked.step = DONE
    locked.finished_at = now
    locked.completion_code = _completion_code(locked)
    return ["status", "step", "finished_at", "completion_code"]


def participant_mark_next(locked: Participant, from_step: str, now: datetime) -> list[str]:
    """Moves a locked participant, active on `from_step`, to the next step of their study's sequence, or
    completes them after the last one (`participant_mark_completed`). Returns the changed fields; the caller
    saves them in its transaction (the answer protocol, studies/answers.py, with the answer that ends the
    step)."""
    next_step = step_after(locked.study, from_step)
    if next_step == DONE:
        return participant_mark_completed(locked, now)
    locked.step = next_step
    locked.last_seen_at = now
    return ["step", "last_seen_at"]


def participant_complete(*, participant: Participant, now: datetime | None = None) -> bool:
    """Finishes an active participant (see `participant_mark_completed`). Returns False and changes nothing
    unless the participant was active. Locks the participant's row."""
    return _complete(participant, now or timezone.now(), on_step=None)


def _complete(participant: Participant, now: datetime, *, on_step: str | None) -> bool:
    """Completes the participant under their row lock if they are active (and on `on_step`, when given)."""
    with transaction.atomic():
        locked = participant_lock(participant)
        if locked.status != Participant.Status.ACTIVE or (on_step is not None and locked.step != on_step):
            return False
        fields = participant_mark_completed(locked, now)
        locked.last_seen_at = now
        locked.save(update_fields=[*fields, "last_seen_at"])
    participant_state_copy(participant, locked)
    return True


def participant_advance(*, participant: Participant, from_step: str, now: datetime | None = None) -> bool:
    """Moves an active participant from `from_step` to the next step of their study's sequence; the one way a
    step is left. Returns False and changes nothing when the participant is no longer active on `from_step`
    (a resubmitted page).

    A conditional UPDATE naming the expected status and step; reaching `done` completes the participant under
    the row lock (their code depends on their exclusion flag). Callable inside a transaction that already
    holds the row lock (the answer services write their answer, then advance, in one transaction)."""
    now = now or timezone.now()
    next_step = step_after(participant.study, from_step)
    if next_step == DONE:
        return _complete(participant, now, on_step=from_step)
    moved = Participant.objects.filter(
        pk=participant.pk, status=Participant.Status.ACTIVE, step=from_step
    ).update(step=next_step, last_seen_at=now)
    if moved:
        participant.step = next_step
        participant.last_seen_at = now
    else:  # moved elsewhere meanwhile (another tab): the caller's instance shows where they are now
        participant.refresh_from_db(fields=STATE_FIELDS)
    return bool(moved)


def participant_screen_out(*, participant: Participant, now: datetime | None = None) -> bool:
    """The participant does not agree to take part: status screened_out with the study's screened-out code;
    their unanswered items go back to the pool. Only from the consent step; otherwise nothing happens (False).
    Locks the participant's row."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = participant_lock(participant)
        if not is_on_step(locked, Participant.Step.CONSENT):
            return False
        locked.status = Participant.Status.SCREENED_OUT
        locked.step = DONE
        locked.finished_at = now
        locked.last_seen_at = now
        locked.completion_code = locked.study.screened_out_code
        locked.save(update_fields=["status", "step", "finished_at", "last_seen_at", "completion_code"])
        _release([locked.pk])
    participant_state_copy(participant, locked)
    return True


# --- Enrolment -----------------------------------------------------------------------------------------


def _participant_seed(study: Study) -> int:
    """A per-participant seed derived from the study's seed and a fresh random draw (stored, so the item
    draw can be replayed)."""
    draw = secrets.randbits(64)
    digest = hashlib.sha256(f"{study.seed}:{draw}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # fits a signed 64-bit column


def _validate_external_id(external_id: str) -> str:
    external_id = (external_id or "").strip()
    if not external_id:
        raise InvalidExternalId("The participant id is empty.")
    if len(external_id) > EXTERNAL_ID_MAX_LENGTH:
        raise InvalidExternalId(f"The participant id is longer than {EXTERNAL_ID_MAX_LENGTH} characters.")
    if not external_id.isprintable():
        raise InvalidExternalId("The participant id contains control characters.")
    return external_id


def _resume(participant: Participant) -> Participant:
    if participant.status in (Participant.Status.RETURNED, Participant.Status.TIMED_OUT):
        raise ParticipantCannotRestart(participant)
    return participant


def participant_find(study: Study, external_id: str) -> Participant | None:
    """The participant of `study` with this external id, or None. One hand-written query (studies.rows):
    the entry asks it of every arrival."""
    found = rows.select(Participant, ("study", "external_id"), [study.pk, external_id])
    if found is not None:
        found.study = study
    return found


def participant_enroll(
    *,
    study: Study,
    external_id: str,
    platform: str = Study.Platform.NONE,
    platform_study_id: str = "",
    platform_session_id: str = "",
    platform_data: dict | None = None,
    is_preview: bool = False,
    now: datetime | None = None,
) -> Participant:
    """Enrolls `external_id` in `study`, or resumes them if they are already there.

    Guarantees:
    * The same external id never gets two participants: an existing one is returned as it is
      (completed and screened-out ones too: the flow shows them their outcome). A returned or timed-out
      one raises `ParticipantCannotRestart`: their slot and items went to others.
    * A new participant joins the enrolling condition with the fewest counted participants (completed +
      active-and-not-stale), never one at its quota; ties go to a random one. When every condition is at
      its quota, `StudyFull` is raised and nothing is written. A study that is not live raises
      `StudyNotOpen` (staff previews work in any state). An id that took part in another study of the
      family (parent or wave) of a family-exclusive study raises `AlreadyInFamily`.
    * The participant's assignments are created in the same transaction, by the study kind's policy
      (`StudyKind.assignments_create`).
    * Staff previews (`is_preview=True`) take no slot and are not counted anywhere.
    * Stale participants the count finds are released (timed out, their items given back) before the deal.

    Locking: the Study row is locked (`SELECT ... FOR UPDATE`) for the count-choose-insert sequence, so
    concurrent enrollments in one study run one after another and two arrivals can never both see the last
    free slot, nor both pick the same least-rated items. Other studies are not blocked. The external id is
    looked up again under the lock (in the counting query), and the unique constraint on (study,
    external_id) catches a double arrival of one id that slipped past even that: the loser's IntegrityError
    rolls its transaction back and it resumes the winner's participant.

    Cost (hand-written SQL, studies/rows.py), in one transaction: the lock, one counting query, the
    participant's INSERT and the kind's queries.
    """
    external_id = _validate_external_id(external_id)
    now = now or timezone.now()

    if is_preview or study.state != Study.State.LIVE:
        existing = participant_find(study, external_id)
        if existing is not None:
            return _resume(existing)
        if not is_preview:
            raise StudyNotOpen(study)

    fields = {
        "platform_study_id": platform_study_id[:128],
        "platform_session_id": platform_session_id[:128],
        "platform_data": platform_data or {},
    }
    stale: list[bool] = []
    try:
        with transaction.atomic():
            participant = _enroll_locked(
                study, external_id, stale, now=now, is_preview=is_preview, platform=platform, **fields
            )
    except IntegrityError:
        existing = participant_find(study, external_id)
        if existing is None:
            raise  # some other constraint: a real bug, not a double arrival
        return _resume(existing)
    finally:
        if stale:  # housekeeping, in its own transaction, whatever the enrolment's outcome
            participants_release_stale(now=now, study=study)
    return participant


def _enroll_locked(
    study: Study, external_id: str, stale: list[bool], *, now: datetime, is_preview: bool, **fields
) -> Participant:
    """The count-choose-insert sequence, inside the enrolment's transaction (the Study row locked, unless a
    preview). Stale participants the count finds are released after the transaction (`stale`): they no
    longer count, so the deal need not wait for them."""
    if is_preview:
        locked = study  # a preview takes no slot: nothing to serialise against
    else:
        locked = rows.select(Study, ("id",), [study.pk], lock=True)  # what serialises enrolments
    seed = _participant_seed(locked)
    rng = random.Random(seed)
    condition, existing_id, any_stale = condition_choose(
        locked,
        kind_of(locked),
        external_id,
        rng=rng,
        is_preview=is_preview,
        held=balance_counts.holding(locked, now),
    )
    if any_stale:
        stale.append(True)
    # Re-checked under the lock: a concurrent arrival of the same id may have committed meanwhile.
    if existing_id is not None:
        return _resume(participant_find(locked, external_id))
    if not is_preview:
        if locked.state != Study.State.LIVE:
            raise StudyNotOpen(locked)
        if seen_in_family(locked, external_id):
            raise AlreadyInFamily(locked)
    if condition is None:
        raise StudyFull(locked)
    stamp = timezone.now()
    participant = Participant(
        status=Participant.Status.ACTIVE,
        step=Participant.Step.CONSENT,
        study=locked,
        condition=condition,
        external_id=external_id,
        **fields,
        is_preview=is_preview,
        seed=seed,
        started_at=stamp,
        last_seen_at=stamp,
    )
    rows.insert_many(Participant, [participant], _NEW_PARTICIPANT_FIELDS)
    pages = kind_of(locked).assignments_create(participant, rng=rng, now=now)
    if not is_preview:
        balance_counts.enrolled(participant, pages)
    return participant


# Every column but the key: the ORM's defaults for the ones enrolment does not set.
_NEW_PARTICIPANT_FIELDS = tuple(f.name for f in Participant._meta.concrete_fields if not f.primary_key)


# --- Leaving ----------------------------------------------------------------------------------------------


def _release(participant_ids: list[int]) -> None:
    """Gives back the slots and unanswered items of these participants (the caller changed their status from
    active), on the balance's running totals too."""
    balance_counts.released(participant_ids)


def participants_release_stale(*, now: datetime | None = None, study: Study | None = None) -> int:
    """Marks active participants not seen within their study's time limit as timed out and deletes their
    unanswered assignments, giving the slot and the items back. Returns how many were released.

    Safe to run concurrently with answers: the candidates are locked (`FOR UPDATE`, a set of rows found by
    the rule of studies/balancing.py's `lapsed_sql`, hand-written: every enrolment that sees someone stale
    and every touch of a lapsed participant asks it) and re-checked after the lock, so a participant whose
    answer commits first (and refreshes `last_seen_at`) is not released.
    Idempotent: a second run finds nothing to do.
    """
    now = now or timezone.now()
    if study is not None:
        studies = [study]  # the lazy release of an enrollment or a touch: no need to search for studies
    else:
        studies = Study.objects.filter(participants__status=Participant.Status.ACTIVE).distinct()
    released = 0
    for each in studies:
        with transaction.atomic():
            # Locked in id order, so two overlapping runs (the beat task and a lazy release) cannot deadlock.
            found = Participant.objects.filter(study=each).filter(lapsed(each, now)).order_by("pk")
            ids = list(found.select_for_update().values_list("pk", flat=True))
            if not ids:
                continue
            Participant.objects.filter(id__in=ids).update(
                status=Participant.Status.TIMED_OUT, finished_at=now
            )
            _release(ids)
            released += len(ids)
    return released


def _leave(participant: Participant, status: str, now: datetime | None) -> bool:
    """An active participant stops (`status`): slot and unanswered items given back, in one transaction.
    A conditional UPDATE: False, and nothing changed, unless the participant was active."""
    now = now or timezone.now()
    with transaction.atomic():
        changed = Participant.objects.filter(pk=participant.pk, status=Participant.Status.ACTIVE).update(
            status=status, finished_at=now
        )
        if changed:
            _release([participant.pk])
    if changed:
        participant.status = status
        participant.finished_at = now
    return bool(changed)


def participant_return(*, participant: Participant, now: datetime | None = None) -> bool:
    """The participant chooses to stop: status `returned`, slot and unanswered items given back.
    Returns False (and changes nothing) unless the participant was active."""
    return _leave(participant, Participant.Status.RETURNED, now)


def participant_time_out(*, participant: Participant, now: datetime | None = None) -> bool:
    """The recruiting platform timed the participant out (before our own time limit did): status
    `timed_out`, slot and unanswered items given back. Returns False (and changes nothing) unless the
    participant was active."""
    return _leave(participant, Participant.Status.TIMED_OUT, now)


def participant_touch(*, participant: Participant, now: datetime | None = None) -> Participant:
    """Records that an active participant is still here (`last_seen_at`); called on every request, it
    writes at most once per TOUCH_INTERVAL (a conditional UPDATE).

    A participant already past the time limit is timed out instead of revived: counting stopped holding
    their slot the moment they went stale, so someone else may have it. Returns the participant with its
    current status."""
    now = now or timezone.now()
    if participant.status != Participant.Status.ACTIVE:
        return participant
    cutoff = hold_cutoff(participant.study, participant.step, now)
    seen = participant.last_seen_at
    if seen is not None and seen >= cutoff and now - seen < TOUCH_INTERVAL:
        return participant
    touched = Participant.objects.filter(
        pk=participant.pk, status=Participant.Status.ACTIVE, last_seen_at__gte=cutoff
    ).update(last_seen_at=now)
    if touched:
        participant.last_seen_at = now
        return participant
    participants_release_stale(now=now, study=participant.study)
    participant.refresh_from_db()
    return participant
