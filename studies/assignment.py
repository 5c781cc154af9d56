"""Who gets which condition and which items: enrollment, balancing, and giving back abandoned work.

The rules (issue 2, "assignment that holds during a Prolific launch"):

* An arriving participant joins the *enrolling* condition of the study with the fewest participants
  counted as **completed + active-and-not-stale** ("stale": not seen for `study.time_limit_minutes`),
  never beyond `condition.effective_quota`. A full study writes nothing and raises `StudyFull`.
* Within the condition the participant gets `study.items_per_participant` different responses
  (sample 0, not flagged in review), taken among those with the fewest *live* assignments so that every
  response approaches `study.target_ratings_per_response` evenly. An assignment is live when it is
  answered, or when its participant is completed or active-and-not-stale. Ties are broken, and the order
  is drawn, by a random generator seeded with the participant's stored `seed`.
* The study's attention checks are inserted after `after_item` regular items.
* A questionnaire study gives each participant one of its situations instead, balanced the same way.
* A participant who times out or returns gives back the slot (they stop being counted) and the items
  (their unanswered assignments are deleted).
* Staff previews (`is_preview=True`) are never counted, take no slot and do not move the item balance.

Two arrivals at the same instant are serialised by a row lock on the Study (see `participant_enroll`);
the same external id arriving twice is caught by the unique constraint on (study, external_id).
"""

from __future__ import annotations

import hashlib
import random
import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from .models import Assignment, Condition, Participant, Response, Study, StudySituation

__all__ = [
    "EnrollmentError",
    "StudyNotOpen",
    "StudyFull",
    "ParticipantCannotRestart",
    "InvalidExternalId",
    "participant_enroll",
    "participant_return",
    "participant_time_out",
    "participant_touch",
    "TOUCH_INTERVAL",
    "participants_release_stale",
    "condition_counts",
    "response_live_counts",
]

EXTERNAL_ID_MAX_LENGTH = 128


class EnrollmentError(Exception):
    """Nobody was enrolled and nothing was written. `code` names the outcome for pages and APIs."""

    code = "enrollment_error"


class StudyNotOpen(EnrollmentError):
    code = "study_not_open"

    def __init__(self, study: Study):
        self.study = study
        super().__init__(f"Study {study.slug!r} is {study.state}, not live: it takes no new participants.")


class StudyFull(EnrollmentError):
    code = "study_full"

    def __init__(self, study: Study):
        self.study = study
        super().__init__(f"Every condition of study {study.slug!r} has reached its quota.")


class InvalidExternalId(EnrollmentError):
    code = "invalid_external_id"


class ParticipantCannotRestart(EnrollmentError):
    """The external id belongs to someone who returned the study or timed out: their slot and items were
    given to others, so they cannot start again (recruiting platforms treat a return as final too)."""

    code = "cannot_restart"

    def __init__(self, participant: Participant):
        self.participant = participant
        super().__init__(
            f"Participant {participant.external_id!r} is {participant.status} and cannot restart."
        )


# --- Counting --------------------------------------------------------------------------------------------


def _stale_cutoff(study: Study, now: datetime) -> datetime:
    return now - timedelta(minutes=study.time_limit_minutes)


def _counted_participants(study: Study, now: datetime) -> Q:
    """Participants who hold a slot: completed, or active and seen within the study's time limit."""
    return Q(status=Participant.Status.COMPLETED) | Q(
        status=Participant.Status.ACTIVE, last_seen_at__gte=_stale_cutoff(study, now)
    )


def _live_assignments(study: Study, now: datetime) -> Q:
    """Assignments that count towards an item's balance: answered ones always; the others while their
    participant is completed or active-and-not-stale. Previews never count."""
    return Q(participant__is_preview=False) & (
        Q(answered_at__isnull=False)
        | Q(participant__status=Participant.Status.COMPLETED)
        | Q(
            participant__status=Participant.Status.ACTIVE,
            participant__last_seen_at__gte=_stale_cutoff(study, now),
        )
    )


def condition_counts(*, study: Study, now: datetime | None = None) -> dict[int, int]:
    """Participants holding a slot, per condition id (every condition of the study, zeros included)."""
    now = now or timezone.now()
    counts = dict.fromkeys(Condition.objects.filter(study=study).values_list("id", flat=True), 0)
    rows = (
        Participant.objects.filter(study=study, is_preview=False, condition__isnull=False)
        .filter(_counted_participants(study, now))
        .order_by()  # the default ordering would join the study for nothing
        .values("condition")
        .annotate(n=Count("id"))
    )
    for row in rows:
        counts[row["condition"]] = row["n"]
    return counts


def _eligible_responses(condition: Condition):
    return Response.objects.filter(condition=condition, sample_index=0).exclude(
        review=Response.Review.FLAGGED
    )


def response_live_counts(*, condition: Condition, now: datetime | None = None) -> dict[int, int]:
    """Live assignments per eligible response id of the condition (zeros included)."""
    now = now or timezone.now()
    study = condition.study
    # No ORDER BY: the models' default ordering would join study and prompt for 2,000 ids nobody sorts.
    counts = dict.fromkeys(_eligible_responses(condition).order_by().values_list("id", flat=True), 0)
    # Through the participants of the condition (an index on participant_id finds their few pages each),
    # not through the responses' condition (which joins every assignment of the study to its response).
    # The same rows: a condition's responses are only ever assigned to that condition's participants, and
    # a response id outside `counts` is skipped below anyway.
    rows = (
        Assignment.objects.filter(participant__condition=condition, kind=Assignment.Kind.RESPONSE)
        .filter(_live_assignments(study, now))
        .order_by()
        .values("response")
        .annotate(n=Count("id"))
    )
    for row in rows:
        if row["response"] in counts:  # not a response flagged since it was assigned
            counts[row["response"]] = row["n"]
    return counts


def _situation_live_counts(study: Study, now: datetime) -> dict[int, int]:
    counts = dict.fromkeys(
        StudySituation.objects.filter(study=study).values_list("situation_id", flat=True), 0
    )
    rows = (
        Assignment.objects.filter(
            participant__study=study, kind=Assignment.Kind.SITUATION, situation__in=list(counts)
        )
        .filter(_live_assignments(study, now))
        .order_by()
        .values("situation")
        .annotate(n=Count("id"))
    )
    for row in rows:
        counts[row["situation"]] = row["n"]
    return counts


def _fewest_first(counts: dict[int, int], rng: random.Random) -> list[int]:
    """Keys ordered by count, ties in random order."""
    keys = sorted(counts)  # a fixed starting order, so the draw depends only on the seed and the counts
    rng.shuffle(keys)
    return sorted(keys, key=lambda key: counts[key])  # stable sort keeps the random order within ties


# --- Enrollment -----------------------------------------------------------------------------------------


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


def participant_enroll(
    *,
    study: Study,
    external_id: str,
    platform: str = Study.Platform.NONE,
    platform_study_id: str = "",
    platform_session_id: str = "",
    mturk_assignment_id: str = "",
    mturk_hit_id: str = "",
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
      `StudyNotOpen` (staff previews work in any state).
    * The participant's assignments are created in the same transaction (see `_assignments_create`).
    * Staff previews (`is_preview=True`) take no slot and are not counted anywhere.

    Locking: the Study row is locked (`SELECT ... FOR UPDATE`) for the count-choose-insert sequence, so
    concurrent enrollments in one study run one after another and two arrivals can never both see the last
    free slot, nor both pick the same least-rated items. Other studies are not blocked. The unique
    constraint on (study, external_id) catches a double arrival of one id that slipped past the look-up:
    the loser's IntegrityError rolls its transaction back and it resumes the winner's participant.
    """
    external_id = _validate_external_id(external_id)
    now = now or timezone.now()

    existing = Participant.objects.filter(study=study, external_id=external_id).first()
    if existing is not None:
        return _resume(existing)
    if not is_preview and study.state != Study.State.LIVE:
        raise StudyNotOpen(study)

    # Housekeeping before counting: counting already ignores stale participants, but releasing them also
    # frees their unanswered items for this arrival.
    participants_release_stale(now=now, study=study)

    try:
        with transaction.atomic():
            if is_preview:
                locked = study  # a preview takes no slot: nothing to serialise against
            else:
                locked = Study.objects.select_for_update().get(pk=study.pk)
                if locked.state != Study.State.LIVE:
                    raise StudyNotOpen(locked)
            # Re-checked under the lock: a concurrent arrival of the same id may have committed meanwhile.
            existing = Participant.objects.filter(study=locked, external_id=external_id).first()
            if existing is not None:
                return _resume(existing)

            seed = _participant_seed(locked)
            rng = random.Random(seed)
            condition = _condition_choose(locked, rng=rng, is_preview=is_preview, now=now)
            participant = Participant.objects.create(
                study=locked,
                condition=condition,
                external_id=external_id,
                platform=platform,
                platform_study_id=platform_study_id[:128],
                platform_session_id=platform_session_id[:128],
                mturk_assignment_id=mturk_assignment_id[:128],
                mturk_hit_id=mturk_hit_id[:128],
                is_preview=is_preview,
                seed=seed,
                status=Participant.Status.ACTIVE,
                step=Participant.Step.CONSENT,
            )
            _assignments_create(participant, rng=rng, now=now)
            return participant
    except IntegrityError:
        existing = Participant.objects.filter(study=study, external_id=external_id).first()
        if existing is None:
            raise  # some other constraint: a real bug, not a double arrival
        return _resume(existing)


def _condition_choose(study: Study, *, rng: random.Random, is_preview: bool, now: datetime) -> Condition:
    conditions = {
        c.id: c for c in Condition.objects.filter(study=study, enrolling=True).select_related("study")
    }
    if study.kind == Study.Kind.RATING:
        # A condition with nothing to rate cannot take anyone (one indexed EXISTS per condition).
        conditions = {cid: c for cid, c in conditions.items() if _eligible_responses(c).exists()}
    elif not StudySituation.objects.filter(study=study).exists():
        conditions = {}
    if not conditions:
        raise StudyFull(study)
    counts = condition_counts(study=study, now=now)
    if is_preview:
        open_ids = list(conditions)
    else:
        open_ids = [cid for cid, c in conditions.items() if counts.get(cid, 0) < c.effective_quota]
    if not open_ids:
        raise StudyFull(study)
    ordered = _fewest_first({cid: counts.get(cid, 0) for cid in open_ids}, rng)
    return conditions[ordered[0]]


def _assignments_create(participant: Participant, *, rng: random.Random, now: datetime) -> list[Assignment]:
    """Creates the participant's pages, positions 0..n-1.

    Rating study: `items_per_participant` different responses of the condition, fewest live assignments
    first (random among ties), shown in an order shuffled by the participant's seed, with the study's
    attention checks inserted after `after_item` regular items (checks past the end go last).
    Questionnaire study: one situation of the study, the least used first (random among ties).
    """
    study = participant.study
    if study.kind == Study.Kind.QUESTIONNAIRE:
        counts = _situation_live_counts(study, now)
        situation_id = _fewest_first(counts, rng)[0]
        return [
            Assignment.objects.create(
                participant=participant, position=0, kind=Assignment.Kind.SITUATION, situation_id=situation_id
            )
        ]

    counts = response_live_counts(condition=participant.condition, now=now)
    chosen = _fewest_first(counts, rng)[: study.items_per_participant]
    rng.shuffle(chosen)
    checks = list(study.attention_checks.order_by("after_item", "id"))
    pages: list[Assignment] = []

    def add_checks(selected: Iterable) -> None:
        for check in selected:
            pages.append(Assignment(kind=Assignment.Kind.ATTENTION, attention_check=check))

    for index, response_id in enumerate(chosen):
        add_checks(c for c in checks if c.after_item == index)
        pages.append(Assignment(kind=Assignment.Kind.RESPONSE, response_id=response_id))
    add_checks(c for c in checks if c.after_item >= len(chosen))
    for position, page in enumerate(pages):
        page.participant = participant
        page.position = position
    return Assignment.objects.bulk_create(pages)


# --- Leaving ----------------------------------------------------------------------------------------------


def _release(participant_ids: list[int]) -> None:
    """Gives back the unanswered items of these participants (the caller changed their status)."""
    Assignment.objects.filter(participant_id__in=participant_ids, answered_at__isnull=True).delete()


def participants_release_stale(*, now: datetime | None = None, study: Study | None = None) -> int:
    """Marks active participants not seen within their study's time limit as timed out and deletes their
    unanswered assignments, giving the slot and the items back. Returns how many were released.

    Safe to run concurrently with answers: the candidates are locked (`FOR UPDATE`) and re-checked after
    the lock, so a participant whose answer commits first (and refreshes `last_seen_at`) is not released.
    Idempotent: a second run finds nothing to do.
    """
    now = now or timezone.now()
    if study is not None:
        studies = [study]  # the lazy release on every enrollment: no need to search for studies
    else:
        studies = Study.objects.filter(participants__status=Participant.Status.ACTIVE).distinct()
    released = 0
    for each in studies:
        cutoff = _stale_cutoff(each, now)
        with transaction.atomic():
            # Locked in id order, so two overlapping runs (the beat task and a lazy release) cannot deadlock.
            ids = list(
                Participant.objects.select_for_update()
                .filter(study=each, status=Participant.Status.ACTIVE, last_seen_at__lt=cutoff)
                .order_by("id")
                .values_list("id", flat=True)
            )
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


# How fresh `last_seen_at` must already be for a request to skip writing it again. Staleness is judged in
# minutes (the study's time limit), so a few seconds' imprecision changes nothing, while a write on every
# page view of a launch is a row update per request. Answers write `last_seen_at` themselves.
TOUCH_INTERVAL = timedelta(seconds=20)


def participant_touch(*, participant: Participant, now: datetime | None = None) -> Participant:
    """Records that an active participant is still here (`last_seen_at`); called on every request, it
    writes at most once per TOUCH_INTERVAL.

    A participant already past the time limit is timed out instead of revived: counting stopped holding
    their slot the moment they went stale, so someone else may have it. Returns the participant with its
    current status."""
    now = now or timezone.now()
    if participant.status != Participant.Status.ACTIVE:
        return participant
    cutoff = _stale_cutoff(participant.study, now)
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
