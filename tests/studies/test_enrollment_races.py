"""Enrolment under a launch while stale participants wait to be released: the releases that arrivals start
(after their own transactions) overlap each other, the beat task's and the arrivals' locked counting, on
separate PostgreSQL connections."""

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from kinds.rating.kind import response_live_counts
from studies.models import Assignment, Participant
from studies.participants import participant_enroll, participants_release_stale
from tests.concurrency import race
from tests.factories import rating_study_build

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_arrivals_and_the_beat_task_release_each_stale_participant_once_and_keep_the_balance(
    requires_postgres,
):
    study = rating_study_build(conditions=3, prompts=20, items_per_participant=3, quota_per_condition=100)
    for i in range(15):
        participant_enroll(study=study, external_id=f"OLD{i}")
    Participant.objects.update(last_seen_at=timezone.now() - timedelta(days=1))

    def arrive_or_release(i):
        if i % 4 == 0:
            return participants_release_stale()
        return participant_enroll(study=study, external_id=f"NEW{i:03d}")

    results, errors = race(arrive_or_release, 40)

    assert not errors, errors  # no deadlock, no double release
    old = Participant.objects.filter(external_id__startswith="OLD")
    assert set(old.values_list("status", flat=True)) == {Participant.Status.TIMED_OUT}
    assert not Assignment.objects.filter(participant__in=old).exists()
    assert sum(n for i, n in results.items() if i % 4 == 0) <= 15
    new = Participant.objects.filter(external_id__startswith="NEW")
    assert new.count() == 30
    sizes = Counter(new.values_list("condition__name", flat=True))
    assert max(sizes.values()) - min(sizes.values()) <= 1, sizes
    for condition in study.conditions.all():
        counts = response_live_counts(condition=condition)
        assert max(counts.values()) - min(counts.values()) <= 1, (condition.name, counts)
