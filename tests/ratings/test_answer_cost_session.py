"""`rating_submit_for`: the in-place answer with the participant found and locked by one
query in the answer's own transaction — three SQL statements instead of four, the same answers stored,
exactly once, and the usual path left to every case it does not take."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ratings import services
from studies.models import Assignment, AttentionCheck, Participant, Rating
from tests.factories import AttentionCheckFactory, rating_study_build
from tests.ratings.helpers import consent_and_instructions, current_position, enter
from tests.studies.test_assignment_races import race


@pytest.fixture
def study():
    return rating_study_build(conditions=1, prompts=6, items_per_participant=3)


def _on_items(client, study, pid="PID1"):
    enter(client, study, pid)
    consent_and_instructions(client, study)
    return Participant.objects.get(external_id=pid), current_position(client, study)


def _submit(participant, study, position, value=2, **kwargs):
    return services.rating_submit_for(
        participant_id=participant.pk, slug=study.slug, position=position, value=value, **kwargs
    )


@pytest.mark.django_db
def test_an_answer_is_stored_with_its_next_item_in_three_statements(client, study):
    participant, position = _on_items(client, study)
    with CaptureQueriesContext(connection) as queries:
        answered = _submit(participant, study, position)
    statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    if connection.vendor == "postgresql":
        assert len(statements) == 3, statements
        assert statements[0].endswith("FOR UPDATE OF p")
    else:  # SQLite: the item's times are their own statement, just before the rating's
        assert len(statements) == 4, statements
    assert answered.error is None and answered.submitted.created
    assert answered.participant.pk == participant.pk and answered.participant.study.slug == study.slug
    rating = Rating.objects.get(assignment__participant=participant, assignment__position=position)
    assert rating.value == 2 and answered.submitted.rating.pk == rating.pk
    following = answered.submitted.next_item
    assert following is not None and following.number == 2 and following.total == 3
    assert Assignment.objects.get(pk=following.assignment.pk).shown_at == rating.created_at
    assert current_position(client, study) == following.assignment.position  # the page agrees


@pytest.mark.django_db
def test_the_last_answer_completes_the_participant(client, study):
    participant, position = _on_items(client, study)
    for _ in range(3):
        answered = _submit(participant, study, position)
        following = answered.submitted.next_item
        position = following.assignment.position if following else None
    assert answered.submitted.completed and position is None
    assert answered.participant.status == Participant.Status.COMPLETED
    assert answered.participant.completion_code == study.completion_code
    assert Participant.objects.get(pk=participant.pk).status == Participant.Status.COMPLETED


@pytest.mark.django_db
def test_a_failed_attention_check_counts_as_on_the_usual_path(client, study):
    AttentionCheckFactory(study=study, after_item=0, expected_value=1)
    participant, position = _on_items(client, study)
    assert Assignment.objects.get(participant=participant, position=position).kind == "attention"
    answered = _submit(participant, study, position, value=3)
    assert answered.submitted.created and answered.participant.attention_failures == 1
    assert Participant.objects.get(pk=participant.pk).attention_failures == 1
    assert AttentionCheck.objects.count() == 1


@pytest.mark.django_db
def test_a_refused_answer_comes_back_as_its_error_with_nothing_stored(client, study):
    participant, position = _on_items(client, study)
    later = Assignment.objects.filter(participant=participant).exclude(position=position).first()
    answered = _submit(participant, study, later.position)
    assert isinstance(answered.error, services.NotCurrentItem) and answered.submitted is None
    assert isinstance(_submit(participant, study, 999).error, services.NotYourItem)
    assert isinstance(_submit(participant, study, position, value=42).error, services.InvalidValue)
    assert Rating.objects.count() == 0
    assert _submit(participant, study, position).submitted.created  # the current one still goes in
    again = _submit(participant, study, position)  # a retry: the stored answer stands
    assert again.submitted.created is False and Rating.objects.count() == 1


@pytest.mark.django_db
def test_everything_else_is_left_to_the_usual_path_with_nothing_stored(client, study):
    participant, position = _on_items(client, study)
    assert (
        services.rating_submit_for(participant_id=None, slug=study.slug, position=position, value=2) is None
    )
    other = rating_study_build(conditions=1, prompts=3, items_per_participant=3)
    # a participant of another study
    assert (
        services.rating_submit_for(participant_id=participant.pk, slug=other.slug, position=position, value=2)
        is None
    )
    # Not seen within the study's time limit: the usual path's touch times them out.
    late = timezone.now() + timedelta(minutes=study.time_limit_minutes + 1)
    assert _submit(participant, study, position, now=late) is None
    # Not on the items step.
    Participant.objects.filter(pk=participant.pk).update(step=Participant.Step.INSTRUCTIONS)
    assert _submit(participant, study, position) is None
    Participant.objects.filter(pk=participant.pk).update(
        step=Participant.Step.ITEMS, status=Participant.Status.RETURNED
    )
    assert _submit(participant, study, position) is None
    assert Rating.objects.count() == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_same_answer_taken_concurrently_is_stored_exactly_once(requires_postgres):
    study = rating_study_build(conditions=1, prompts=5, items_per_participant=3)
    participant, position = _on_items(Client(), study)

    def answer(i):
        return _submit(participant, study, position, value=3 if i % 2 else 1).submitted.created

    results, errors = race(answer, 20)

    assert not errors, errors
    assert sorted(results.values()) == [False] * 19 + [True]  # one stored it, the others found it stored
    assert Rating.objects.filter(assignment__position=position).count() == 1 == Rating.objects.count()
    shown = Assignment.objects.filter(
        participant=participant, shown_at__isnull=False, answered_at__isnull=True
    )
    assert shown.count() == 1  # the next item, marked shown once
