"""studies.rows: hand-written SQL read into model instances equal to the ORM's own."""

from datetime import timedelta

import pytest
from django.utils import timezone

from kinds.rating.models import Rating
from studies import rows
from studies.models import Assignment, Participant, Study
from tests.factories import ParticipantFactory, ResponseFactory, StudyFactory

pytestmark = pytest.mark.django_db


def _fields(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def _read(model, pk):
    row = rows.fetchone(
        f"SELECT {rows.columns(model, 't')} FROM {rows.table(model)} t WHERE {rows.column(model, 'id', 't')} = %s",
        [pk],
    )
    return rows.instance(model, row)


def test_instances_equal_the_orms_json_datetimes_and_choices_included():
    study = StudyFactory(
        scale=[{"value": 1, "label": "Good"}, {"value": 2, "label": "Okay"}, {"value": 3, "label": "Bad ✓"}],
        worked_examples=[{"situation": "s", "rating": 1}],
    )
    participant = ParticipantFactory(
        study=study,
        last_seen_at=timezone.now() - timedelta(seconds=5),
        exclusion_reasons=["attention checks failed: 2 of 2"],
        teq_answers={"1": "often"},
        teq_score=33,
    )
    for model, pk in ((Study, study.pk), (Participant, participant.pk)):
        built, end = _read(model, pk)
        orm = model.objects.get(pk=pk)
        assert _fields(built) == _fields(orm)
        assert end == len(model._meta.concrete_fields)
        assert not built._state.adding and built._state.db == "default"
    built, _ = _read(Study, study.pk)
    assert built.scale[2]["label"] == "Bad ✓" and built.scale_values == [1, 2, 3]


def test_instances_read_from_the_middle_of_a_row_and_save_like_orm_instances():
    response = ResponseFactory()
    participant = ParticipantFactory(study=response.prompt.study)
    assignment = Assignment.objects.create(participant=participant, position=0, response=response)
    Rating.objects.create(assignment=assignment, value=2, response_time_ms=1500)
    row = rows.fetchone(
        f"SELECT 42, {rows.columns(Assignment, 'a')}, {rows.columns(Rating, 'r')} FROM {rows.table(Assignment)} a"
        f" JOIN {rows.table(Rating)} r ON {rows.column(Rating, 'assignment', 'r')} = {rows.column(Assignment, 'id', 'a')}"
        f" WHERE {rows.column(Assignment, 'id', 'a')} = %s",
        [assignment.pk],
    )
    built_assignment, end = rows.instance(Assignment, row, 1)
    built_rating, _ = rows.instance(Rating, row, end)
    assert _fields(built_assignment) == _fields(Assignment.objects.get(pk=assignment.pk))
    assert _fields(built_rating) == _fields(Rating.objects.get(assignment=assignment))
    built_assignment.shown_at = timezone.now()
    built_assignment.save(update_fields=["shown_at"])  # an UPDATE of a loaded row, not an INSERT
    assert Assignment.objects.count() == 1
    assert Assignment.objects.get().shown_at == built_assignment.shown_at
