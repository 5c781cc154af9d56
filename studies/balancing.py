"""Who counts towards the balance of a study: the counting rules every study kind's assignment policy uses.

* A participant holds a slot in their condition while completed, or active and seen within the study's time
  limit (`study.time_limit_minutes`); a participant past it is "stale" and counts no more. Before consent the
  hold is shorter (PARTICIPANT_CONSENT_HOLD_MINUTES): made-up ids that never get past the entry free their
  places quickly. `hold_cutoff` is that rule; `holding` asks it of the database.
* An assignment is *live* (it counts towards its item's balance) when it is answered, or while its participant
  is completed or holding. Staff previews never count.
* Ties are broken by a hash of each id with two numbers drawn from a random generator seeded with the
  participant's stored seed (`tie_break_key`): every tied condition or item is equally likely to come first. A
  participant's draws come in a fixed order (the condition's tie-break, then the kind's), so the whole
  enrolment replays from the seed.

A study kind's assignment policy (studies/kinds/) builds on these; the participant lifecycle
(studies/participants.py) uses them to choose a condition.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone

from .models import Condition, Participant, Study


def stale_cutoff(study: Study, now: datetime) -> datetime:
    return now - timedelta(minutes=study.time_limit_minutes)


def consent_cutoff(now: datetime) -> datetime:
    return now - timedelta(minutes=settings.PARTICIPANT_CONSENT_HOLD_MINUTES)


def hold_cutoff(study: Study, step: str, now: datetime) -> datetime:
    """The oldest `last_seen_at` at which an active participant on `step` still holds their place: seen within
    the study's time limit, and, before they agreed to the consent form, within PARTICIPANT_CONSENT_HOLD_MINUTES
    (an id that opens the link and goes no further frees its place quickly)."""
    cutoff = stale_cutoff(study, now)
    return max(cutoff, consent_cutoff(now)) if step == Participant.Step.CONSENT else cutoff


def _q(prefix: str, **lookups) -> Q:
    return Q(**{f"{prefix}{name}": value for name, value in lookups.items()})


def holding(study: Study, now: datetime, prefix: str = "") -> Q:
    """Active participants whose hold on their place has not lapsed (`hold_cutoff`). `prefix` reaches them
    through a relation."""
    consent = Participant.Step.CONSENT
    return _q(prefix, status=Participant.Status.ACTIVE) & (
        (_q(prefix, step=consent) & _q(prefix, last_seen_at__gte=hold_cutoff(study, consent, now)))
        | (~_q(prefix, step=consent) & _q(prefix, last_seen_at__gte=hold_cutoff(study, "", now)))
    )


def lapsed(study: Study, now: datetime) -> Q:
    """Active participants whose hold has lapsed (the ones `participants_release_stale` times out)."""
    return Q(status=Participant.Status.ACTIVE) & ~holding(study, now)


def counted_participants(study: Study, now: datetime, prefix: str = "") -> Q:
    """Participants who hold a slot: completed, or holding (see `holding`); previews never."""
    return _q(prefix, is_preview=False) & (
        _q(prefix, status=Participant.Status.COMPLETED) | holding(study, now, prefix)
    )


def live_assignments(study: Study, now: datetime, prefix: str = "") -> Q:
    """Assignments that count towards an item's balance: answered ones always; the others while their
    participant is completed or holding. Previews never count. `prefix` reaches them through a relation."""
    participant = f"{prefix}participant__"
    return _q(participant, is_preview=False) & (
        _q(prefix, answered_at__isnull=False)
        | _q(participant, status=Participant.Status.COMPLETED)
        | holding(study, now, prefix=participant)
    )


def condition_choose(
    study: Study,
    kind,
    external_id: str,
    *,
    rng: random.Random,
    is_preview: bool,
    held: tuple[dict[int, int], bool],
) -> tuple[Condition | None, int | None, bool]:
    """For an enrolment, under the study's lock: the condition a newcomer joins (None: the study is full),
    the id of a participant who already has `external_id` (None: nobody), and whether the study has stale
    participants to release. `held` is ({condition id: participants holding a slot}, whether anyone is stale),
    as `condition_counts` would count them (studies/balance_counts.py `holding` reads them from running
    totals). The least filled of the enrolling conditions that `kind` (the study's kind) finds enrollable
    (`StudyKind.enrollable`) and that are below their quota (previews: any), ties by `tie_break_key` with the
    first two draws of `rng` (drawn whatever the outcome, so the kind's draws that follow are always the same
    ones)."""
    draws = tie_break_draws(rng)
    existing = (
        Participant.objects.filter(study=study, external_id=external_id).order_by().values_list("pk")[:1]
    )
    existing_id = next((pk for (pk,) in existing), None)
    counted, stale = held
    if existing_id is not None:
        return None, existing_id, stale
    conditions = []
    for condition in (
        Condition.objects.filter(study=study, enrolling=True).filter(kind.enrollable()).order_by("pk")
    ):
        condition.study = study
        condition.counted = counted.get(condition.pk, 0)
        if is_preview or condition.counted < condition.effective_quota:
            conditions.append(condition)
    if not conditions:
        return None, None, stale
    chosen = min(conditions, key=lambda c: (c.counted, tie_break_key(c.pk, draws), c.pk))
    return chosen, None, stale


def _counted(conditions, study: Study, now: datetime):
    """`conditions` (a queryset), each with `counted`: its participants who hold a slot, counted from the rows
    (what the running totals of studies/balance_counts.py must always equal)."""
    counted = counted_participants(study, now, prefix="participants__")
    return conditions.annotate(counted=Count("participants", filter=counted)).order_by("pk")


def condition_counts(*, study: Study, now: datetime | None = None) -> dict[int, int]:
    """Participants holding a slot, per condition id (every condition of the study, zeros included)."""
    found = _counted(Condition.objects.filter(study=study), study, now or timezone.now())
    return {condition.pk: condition.counted for condition in found}


def fewest_first(counts: dict[int, int], rng: random.Random) -> list[int]:
    """Keys ordered by count, ties in random order."""
    keys = sorted(counts)  # a fixed starting order, so the draw depends only on the seed and the counts
    rng.shuffle(keys)
    return sorted(keys, key=lambda key: counts[key])  # stable sort keeps the random order within ties


# Two rounds of (x XOR draw) * odd constant mod a prime below 2**32.
_HASH_PRIME = 4294967291
_HASH_ROUNDS = (2654435761, 1597334677)


def tie_break_draws(rng: random.Random) -> tuple[int, ...]:
    """The two numbers one tie-break draws from `rng`."""
    return tuple(rng.getrandbits(31) for _ in _HASH_ROUNDS)


def tie_break_key(value: int, draws: tuple[int, ...]) -> int:
    """A hash of `value` with the two numbers `draws` (`tie_break_draws`): a random order of ids, replayable."""
    for draw, multiplier in zip(draws, _HASH_ROUNDS, strict=True):
        value = ((value ^ draw) * multiplier) % _HASH_PRIME
    return value
