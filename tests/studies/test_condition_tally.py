"""A condition's completed participants, counted by the database as they complete (`ConditionTally`, migration
0016), which the enrolment statement reads instead of counting every participant the condition ever had: right
after every way a participant's status, preview flag or condition changes, under a race, and repaired by
`tallies_rebuild`."""

from collections import Counter
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection, transaction

from studies.balance_models import ConditionTally
from studies.balancing import condition_tallies_rebuild
from studies.models import Participant
from studies.participants import participant_complete, participant_enroll
from tests.factories import rating_study_build
from tests.studies.test_assignment_races import race

pytestmark = [pytest.mark.postgres]

COMPLETED = Participant.Status.COMPLETED


def tallies() -> dict[str, int]:
    """Each condition's tally, by the condition's name (conditions without a row, or at 0, left out)."""
    return {
        t.condition.name: t.completed
        for t in ConditionTally.objects.select_related("condition")
        if t.completed
    }


def recount() -> dict[str, int]:
    """What the tallies must say: completed participants who are not previews, by condition."""
    return dict(
        Counter(
            Participant.objects.filter(
                status=COMPLETED, is_preview=False, condition__isnull=False
            ).values_list("condition__name", flat=True)
        )
    )


@pytest.mark.django_db
def test_the_tally_follows_every_change_of_status_preview_flag_and_condition(requires_postgres):
    study = rating_study_build(conditions=2, prompts=6, items_per_participant=2, quota_per_condition=50)
    arm0, arm1 = study.conditions.order_by("name")
    people = [participant_enroll(study=study, external_id=f"P{i}") for i in range(8)]
    Participant.objects.filter(pk__in=[p.pk for p in people]).update(condition=arm0)
    preview = participant_enroll(study=study, external_id="staff", is_preview=True)

    Participant.objects.filter(pk__in=[p.pk for p in people[:3]]).update(status=COMPLETED)  # one UPDATE
    participant_complete(participant=people[3])  # the service
    Participant.objects.filter(pk=preview.pk).update(
        status=COMPLETED, condition=arm0
    )  # a preview: not counted
    assert tallies() == recount() == {"arm0": 4}

    Participant.objects.filter(pk=people[0].pk).update(status=Participant.Status.EXCLUDED)
    Participant.objects.filter(pk=people[1].pk).update(condition=arm1)
    Participant.objects.filter(pk=people[2].pk).update(is_preview=True)
    Participant.objects.filter(pk=preview.pk).update(is_preview=False)
    assert tallies() == recount() == {"arm0": 2, "arm1": 1}

    touched = Participant.objects.get(pk=people[3].pk)
    touched.save()  # a save that writes every column back, the status unchanged: counted once still
    Participant.objects.filter(pk=people[4].pk).delete()  # active: nothing to take off
    Participant.objects.filter(pk=preview.pk).delete()
    Participant.objects.bulk_create(
        [
            Participant(study=study, condition=arm1, external_id=f"imported{i}", status=COMPLETED)
            for i in range(5)
        ]
    )
    assert tallies() == recount() == {"arm0": 1, "arm1": 6}
    assert condition_tallies_rebuild() == (0, 2)  # nothing to repair


@pytest.mark.django_db(transaction=True)
def test_participants_completing_and_excluded_at_once_leave_the_tally_right(requires_postgres):
    study = rating_study_build(conditions=1, prompts=6, items_per_participant=2, quota_per_condition=50)
    people = [participant_enroll(study=study, external_id=f"P{i}") for i in range(16)]
    Participant.objects.filter(pk__in=[p.pk for p in people[12:]]).update(status=COMPLETED)

    def change(i):
        if i < 12:
            assert participant_complete(participant=people[i])  # 12 complete
            return
        with transaction.atomic():  # while 4 completed ones are excluded
            participant = Participant.objects.select_for_update().get(pk=people[i].pk)
            participant.status = Participant.Status.EXCLUDED
            participant.save(update_fields=["status"])

    results, errors = race(change, 16)
    assert not errors
    assert tallies() == recount() == {"arm0": 12}


@pytest.mark.django_db
def test_tallies_rebuild_repairs_a_tally_that_was_bypassed(requires_postgres):
    study = rating_study_build(conditions=2, prompts=6, items_per_participant=2, quota_per_condition=50)
    for i in range(3):
        participant = participant_enroll(study=study, external_id=f"P{i}")
        Participant.objects.filter(pk=participant.pk).update(status=COMPLETED)
    expected = recount()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE studies_conditiontally SET completed = completed + 5"
        )  # as a bad restore leaves it
    assert tallies() != expected
    out = StringIO()
    call_command("tallies_rebuild", stdout=out)
    assert f"{len(expected)} conditions with completed participants; {len(expected)} tallies were wrong" in (
        out.getvalue()
    )
    assert tallies() == expected
