"""Enrollment under a launch: many arrivals at the same instant, each on its own PostgreSQL connection."""

from collections import Counter

import pytest

from kinds.rating.kind import response_live_counts
from studies.models import Participant
from studies.participants import StudyFull, participant_enroll
from tests.concurrency import race
from tests.factories import rating_study_build

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ARRIVALS = 52  # PostgreSQL here allows 100 connections, shared with the rest of the suite


def test_simultaneous_arrivals_fill_conditions_evenly_and_never_past_their_quota(requires_postgres):
    # 3 conditions, quotas 17 + 17 + 15 = 49 places for 52 arrivals: the quotas run out.
    study = rating_study_build(conditions=3, prompts=20, items_per_participant=3, quota_per_condition=17)
    study.conditions.filter(name="arm2").update(quota=15)

    results, errors = race(lambda i: participant_enroll(study=study, external_id=f"PID{i:03d}"), ARRIVALS)

    assert all(isinstance(e, StudyFull) for e in errors.values()), errors
    assert len(results) == 49 and len(errors) == 3
    sizes = Counter(Participant.objects.filter(study=study).values_list("condition__name", flat=True))
    assert sizes == {"arm0": 17, "arm1": 17, "arm2": 15}
    assert Participant.objects.filter(study=study).count() == len({p.external_id for p in results.values()})
    for condition in study.conditions.all():
        counts = response_live_counts(condition=condition)
        assert max(counts.values()) - min(counts.values()) <= 1, (condition.name, counts)


def test_simultaneous_arrivals_below_the_quotas_differ_by_at_most_one_per_condition(requires_postgres):
    study = rating_study_build(conditions=3, prompts=20, items_per_participant=3, quota_per_condition=100)

    results, errors = race(lambda i: participant_enroll(study=study, external_id=f"PID{i:03d}"), ARRIVALS)

    assert not errors
    sizes = Counter(Participant.objects.filter(study=study).values_list("condition__name", flat=True))
    assert sum(sizes.values()) == ARRIVALS and len(sizes) == 3
    assert max(sizes.values()) - min(sizes.values()) <= 1, sizes
    for condition in study.conditions.all():
        counts = response_live_counts(condition=condition)
        assert max(counts.values()) - min(counts.values()) <= 1, (condition.name, counts)


def test_the_same_external_id_arriving_from_many_threads_enrolls_exactly_once(requires_postgres):
    study = rating_study_build(conditions=3, prompts=10, quota_per_condition=100)

    results, errors = race(lambda i: participant_enroll(study=study, external_id="SAME-PID"), 30)

    assert not errors
    assert len({p.pk for p in results.values()}) == 1
    (participant,) = Participant.objects.filter(study=study)
    assert participant.assignments.count() == study.items_per_participant


def test_overlapping_releases_time_each_stale_participant_out_once(requires_postgres):
    from datetime import timedelta

    from django.utils import timezone

    from studies.participants import participants_release_stale

    study = rating_study_build(conditions=2, prompts=10, quota_per_condition=100)
    for i in range(20):
        participant_enroll(study=study, external_id=f"OLD{i}")
    Participant.objects.update(last_seen_at=timezone.now() - timedelta(days=1))

    results, errors = race(lambda i: participants_release_stale(), 20)

    assert not errors  # no deadlock between the runs
    assert sum(results.values()) == 20
    assert Participant.objects.filter(status=Participant.Status.TIMED_OUT).count() == 20
    assert not Participant.objects.filter(assignments__isnull=False).exists()
