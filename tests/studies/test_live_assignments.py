"""The count of live assignments enrolment deals by (`response_live_counts`, the balance rule of
studies/balancing.py) as participants come and go: a stale participant's pages stop counting at once, and
enrolments racing releases over the same responses neither deadlock nor miscount."""

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from kinds.rating.kind import response_live_counts
from studies.models import Participant
from studies.participants import participant_enroll, participant_return
from tests.concurrency import race
from tests.factories import rating_study_build

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_stale_participant_s_items_go_to_the_next_newcomer_who_finds_them():
    # Four responses, two per participant: `first` and `second` hold all four once each. When `first` goes
    # stale their two stop counting, so the next newcomer gets exactly those, now the least assigned; the
    # newcomer's enrolment then times `first` out.
    study = rating_study_build(conditions=1, prompts=4, items_per_participant=2, quota_per_condition=50)
    first = participant_enroll(study=study, external_id="first")
    participant_enroll(study=study, external_id="second")
    held = set(first.assignments.values_list("response_id", flat=True))
    Participant.objects.filter(pk=first.pk).update(last_seen_at=timezone.now() - timedelta(days=1))
    assert sorted(response_live_counts(condition=first.condition).values()) == [0, 0, 1, 1]

    newcomer = participant_enroll(study=study, external_id="newcomer")

    assert set(newcomer.assignments.values_list("response_id", flat=True)) == held
    first.refresh_from_db()
    assert first.status == Participant.Status.TIMED_OUT
    assert not first.assignments.exists()


def test_enrolments_racing_releases_over_the_same_responses_neither_deadlock_nor_miscount(requires_postgres):
    # Ten responses, eight a participant: every enrolment and every release touches most of them, in no
    # particular order (the responses a newcomer gets, the pages a release deletes). Three rounds.
    study = rating_study_build(conditions=1, prompts=10, items_per_participant=8, quota_per_condition=2000)
    condition = study.conditions.get()
    for round_ in range(3):
        leaving = [participant_enroll(study=study, external_id=f"old{round_}-{i:02d}") for i in range(32)]
        random.Random(round_).shuffle(leaving)
        for participant in leaving[:8]:  # stale: the arrivals release them
            Participant.objects.filter(pk=participant.pk).update(
                last_seen_at=timezone.now() - timedelta(days=1)
            )

        def act(i, leaving=leaving, round_=round_):
            if i % 2 == 0:
                return participant_return(participant=leaving[8 + i // 2])
            return participant_enroll(study=study, external_id=f"new{round_}-{i:02d}")

        results, errors = race(act, 48)

        assert not errors, errors
        assert len(results) == 48
        gone = Participant.objects.filter(study=study, external_id__startswith=f"old{round_}-")
        assert sorted(gone.values_list("status", flat=True)) == ["returned"] * 24 + ["timed_out"] * 8
        # Only the newcomers' pages are left: 24 a round, eight each, spread evenly over the ten responses.
        counts = response_live_counts(condition=condition)
        assert sum(counts.values()) == 8 * 24 * (round_ + 1)
        assert max(counts.values()) - min(counts.values()) <= 1
