"""The live status page's participant counts come from running tallies (studies/status_tally.py) and equal a
count of the rows, through every kind of change and under concurrent enrolments, departures and verdicts."""

from collections import defaultdict

import pytest
from django.db.models import Count, Q

from studies.models import Participant, ParticipantAuthenticity, StatusDelta, Study
from studies.participants import participant_enroll, participant_return, participant_screen_out
from studies.selectors import STATUSES, study_status
from tests.factories import ParticipantFactory, rating_study_build
from tests.races import writers_against_readers


def counted(study: Study) -> dict:
    """The counts from the rows: {condition name or None: (by status, flagged, unauthentic)}."""
    out = defaultdict(lambda: [dict.fromkeys(STATUSES, 0), 0, 0])
    rows = (
        Participant.objects.filter(study=study, is_preview=False)
        .values_list("condition__name", "status")
        .annotate(
            n=Count("id"),
            flagged=Count("id", filter=Q(flagged_for_exclusion=True)),
            unauthentic=Count("id", filter=Q(authenticity__excluded=True)),
        )
    )
    for name, status, n, flagged, unauthentic in rows:
        out[name][0][status] += n
        out[name][1] += flagged
        out[name][2] += unauthentic
    return {name: tuple(v) for name, v in out.items() if v[0] != dict.fromkeys(STATUSES, 0)}


def shown(study: Study) -> dict:
    """The same numbers as the live status page shows them."""
    status = study_status(study=study)
    out = {
        c["name"]: (c["participants"], c["flagged_for_exclusion"], c["authenticity_flagged"])
        for c in status["conditions"]
    }
    out[None] = (status["participants_without_condition"], 0, 0)
    return {name: v for name, v in out.items() if v[0] != dict.fromkeys(STATUSES, 0)}


@pytest.mark.django_db
def test_the_counts_equal_the_rows_through_every_kind_of_change():
    study = rating_study_build(conditions=2, prompts=6, items_per_participant=2, quota_per_condition=50)
    arm0, arm1 = study.conditions.order_by("position")

    def check():
        assert shown(study) == counted(study)

    people = [participant_enroll(study=study, external_id=f"P{i}") for i in range(6)]
    participant_enroll(study=study, external_id="staff", is_preview=True)  # never counted
    check()
    participant_return(participant=people[0])
    participant_screen_out(participant=people[1])
    Participant.objects.filter(pk=people[2].pk).update(status=Participant.Status.COMPLETED)
    check()
    Participant.objects.filter(pk=people[3].pk).update(flagged_for_exclusion=True, attention_failures=2)
    check()
    verdict = ParticipantAuthenticity.objects.create(
        participant=people[4], score=90, flagged=True, excluded=True
    )
    ParticipantAuthenticity.objects.create(participant=people[5], score=10)  # not excluded: not counted
    check()
    verdict.excluded = False
    verdict.save()
    check()
    ParticipantAuthenticity.objects.filter(pk=verdict.pk).update(excluded=True)
    check()
    Participant.objects.filter(pk=people[4].pk).update(
        condition=arm1 if people[4].condition == arm0 else arm0
    )
    Participant.objects.filter(pk=people[5].pk).update(is_preview=True)
    ParticipantFactory(study=study, condition=None, external_id="no-condition-yet")
    check()
    Participant.objects.filter(pk__in=[people[3].pk, people[4].pk]).delete()  # the verdict with them
    check()
    assert not StatusDelta.objects.filter(study_id=study.pk).exists()  # every look folds what changed


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_counts_stay_equal_to_the_rows_under_concurrent_changes_and_readers(requires_postgres):
    # Twelve arrivals enrol, half of them leave, a third get an authenticity verdict, on their own connections,
    # while three readers fold the tallies again and again: a delta folded twice or lost would show at the end.
    study = rating_study_build(conditions=3, prompts=12, items_per_participant=2, quota_per_condition=100)

    def arrive(i: int) -> None:
        someone = participant_enroll(study=study, external_id=f"C{i:02d}")
        if i % 3 == 0:
            ParticipantAuthenticity.objects.create(participant=someone, score=80, flagged=True, excluded=True)
        if i % 2 == 0:
            participant_return(participant=someone)
        if i % 6 == 0:
            ParticipantAuthenticity.objects.filter(participant=someone).update(excluded=False)

    looks, errors = writers_against_readers(
        arrive, 12, lambda: study_status(study=Study.objects.get(pk=study.pk))
    )

    assert not errors, errors
    assert looks
    assert shown(study) == counted(study)
    totals = study_status(study=study)["totals"]
    assert totals["participants"]["active"] == 6 and totals["participants"]["returned"] == 6
    assert totals["authenticity_flagged"] == 2
