"""Who counts towards the balance of a study: the counting rules every study kind's assignment policy uses.

* A participant holds a slot in their condition while completed, or active and seen within the study's time
  limit (`study.time_limit_minutes`); a participant past it is "stale" and counts no more. Before consent the
  hold is shorter (PARTICIPANT_CONSENT_HOLD_MINUTES): made-up ids that never get past the entry free their
  places quickly.
* An assignment is *live* (it counts towards its item's balance) when it is answered, or while its participant
  is completed or active-and-not-stale. Staff previews never count.
* Ties are broken by a random generator seeded with the participant's stored seed (`fewest_first`).

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


def holding(study: Study, now: datetime, prefix: str = "") -> Q:
    """Active participants whose hold on their place has not lapsed: seen within the study's time limit,
    and, before they agreed to the consent form, within PARTICIPANT_CONSENT_HOLD_MINUTES (an id that opens
    the link and goes no further frees its place quickly). `prefix` reaches them through a relation."""
    return Q(
        **{
            f"{prefix}status": Participant.Status.ACTIVE,
            f"{prefix}last_seen_at__gte": stale_cutoff(study, now),
        }
    ) & (
        ~Q(**{f"{prefix}step": Participant.Step.CONSENT})
        | Q(**{f"{prefix}last_seen_at__gte": consent_cutoff(now)})
    )


def counted_participants(study: Study, now: datetime) -> Q:
    """Participants who hold a slot: completed, or active and holding (see `holding`)."""
    return Q(status=Participant.Status.COMPLETED) | holding(study, now)


def live_assignments(study: Study, now: datetime) -> Q:
    """Assignments that count towards an item's balance: answered ones always; the others while their
    participant is completed or active-and-not-stale. Previews never count."""
    return Q(participant__is_preview=False) & (
        Q(answered_at__isnull=False)
        | Q(participant__status=Participant.Status.COMPLETED)
        | holding(study, now, prefix="participant__")
    )


def condition_counts(*, study: Study, now: datetime | None = None) -> dict[int, int]:
    """Participants holding a slot, per condition id (every condition of the study, zeros included)."""
    now = now or timezone.now()
    counts = dict.fromkeys(Condition.objects.filter(study=study).values_list("id", flat=True), 0)
    rows = (
        Participant.objects.filter(study=study, is_preview=False, condition__isnull=False)
        .filter(counted_participants(study, now))
        .order_by()  # the default ordering would join the study for nothing
        .values("condition")
        .annotate(n=Count("id"))
    )
    for row in rows:
        counts[row["condition"]] = row["n"]
    return counts


def fewest_first(counts: dict[int, int], rng: random.Random) -> list[int]:
    """Keys ordered by count, ties in random order."""
    keys = sorted(counts)  # a fixed starting order, so the draw depends only on the seed and the counts
    rng.shuffle(keys)
    return sorted(keys, key=lambda key: counts[key])  # stable sort keeps the random order within ties
