"""Enrolment's cost and housekeeping: a new participant is a fixed number of statements, and stale
participants are released when (and only when) the enrolment's count sees any."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from studies.models import Participant
from studies.participants import StudyFull, participant_enroll, participant_find
from tests.factories import AttentionCheckFactory, rating_study_build

pytestmark = pytest.mark.django_db


def test_a_new_participant_costs_a_handful_of_statements():
    study = rating_study_build(conditions=3, prompts=12, items_per_participant=4)
    AttentionCheckFactory(study=study, after_item=1)
    participant_enroll(study=study, external_id="warm")
    with CaptureQueriesContext(connection) as queries:
        participant = participant_enroll(study=study, external_id="counted")
    statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    # the study's lock, the id looked up, the conditions' running totals, the lapsed per condition, the
    # conditions, the participant, the eligible responses with their totals, the lapsed participants' pages,
    # the attention checks, the pages' INSERT, the totals' upsert: none of them grows with the study
    assert len(statements) == 11, statements
    assert [a.kind for a in participant.assignments.order_by("position")] == [
        "response",
        "attention",
        "response",
        "response",
        "response",
    ]
    assert participant_find(study, "counted").pk == participant.pk


def test_the_release_runs_only_when_the_count_saw_someone_stale():
    study = rating_study_build(conditions=1, prompts=6, items_per_participant=3)
    gone = participant_enroll(study=study, external_id="gone")
    with CaptureQueriesContext(connection) as queries:
        participant_enroll(study=study, external_id="second")
    assert not any("timed_out" in q["sql"] for q in queries.captured_queries)

    Participant.objects.filter(pk=gone.pk).update(last_seen_at=timezone.now() - timedelta(days=1))
    with CaptureQueriesContext(connection) as queries:
        participant_enroll(study=study, external_id="third")
    gone.refresh_from_db()
    assert gone.status == Participant.Status.TIMED_OUT and not gone.assignments.exists()
    # Looked for with their rows locked, and timed out, once: after the enrolment's transaction.
    locked = [
        q["sql"]
        for q in queries.captured_queries
        if "FOR UPDATE" in q["sql"] and "studies_study" not in q["sql"]
    ]
    timed_out = [
        q["sql"] for q in queries.captured_queries if "timed_out" in q["sql"] and "UPDATE" in q["sql"]
    ]
    assert len(locked) == 1 and len(timed_out) == 1, (locked, timed_out)


def test_an_enrolment_refused_as_full_still_releases_the_stale():
    study = rating_study_build(conditions=1, prompts=6, items_per_participant=3, quota_per_condition=1)
    holder = participant_enroll(study=study, external_id="holder")
    gone = participant_enroll(study=study, external_id="preview", is_preview=True)
    Participant.objects.filter(pk=gone.pk).update(last_seen_at=timezone.now() - timedelta(days=1))
    with pytest.raises(StudyFull):
        participant_enroll(study=study, external_id="late")
    gone.refresh_from_db()
    assert gone.status == Participant.Status.TIMED_OUT
    assert Participant.objects.get(pk=holder.pk).status == Participant.Status.ACTIVE
    assert not Participant.objects.filter(external_id="late").exists()


def test_an_existing_participant_resumes_when_no_condition_enrolls_or_the_study_is_full():
    study = rating_study_build(conditions=1, prompts=6, items_per_participant=3, quota_per_condition=1)
    first = participant_enroll(study=study, external_id="first")
    with pytest.raises(StudyFull):
        participant_enroll(study=study, external_id="second")
    assert participant_enroll(study=study, external_id="first").pk == first.pk  # full: still resumes
    study.conditions.update(enrolling=False)
    assert participant_enroll(study=study, external_id="first").pk == first.pk
    with pytest.raises(StudyFull):
        participant_enroll(study=study, external_id="third")
    assert Participant.objects.filter(study=study).count() == 1
