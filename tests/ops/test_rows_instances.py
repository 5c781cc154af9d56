"""studies/rows.py builds model instances from hand-written SQL rows exactly as the ORM builds them."""

import pytest
from django.db.models.signals import post_init

from studies import rows
from studies.models import Participant, Study
from tests.factories import rating_study_build
from tests.ops.flow_helpers import live_study, to_first_item

pytestmark = pytest.mark.django_db


def _row(model, pk):
    return rows.fetchone(
        f"SELECT {rows.columns(model, 't')} FROM {rows.table(model)} t WHERE {rows.column(model, 'id', 't')} = %s",
        [pk],
    )


def _fields(instance):
    return {k: v for k, v in instance.__dict__.items() if k != "_state"}


def test_an_instance_from_a_row_is_the_one_the_orm_reads(client):
    study = live_study()
    participant, _ = to_first_item(client, study, "PID1")
    for model, pk in ((Study, study.pk), (Participant, participant.pk)):
        built, end = rows.instance(model, _row(model, pk))
        orm = model.objects.get(pk=pk)
        assert end == len(model._meta.concrete_fields)
        assert _fields(built) == _fields(orm) and type(built) is model
        assert (built._state.adding, built._state.db) == (False, orm._state.db)
        assert built == orm and built.get_deferred_fields() == set()
    built, _ = rows.instance(Participant, _row(Participant, participant.pk))
    assert built.study == study and built.condition_id == participant.condition_id  # relations load
    built.status = Participant.Status.RETURNED
    built.save(update_fields=["status"])
    assert Participant.objects.get(pk=participant.pk).status == Participant.Status.RETURNED


def test_a_model_with_a_post_init_receiver_is_built_through_init():
    study = rating_study_build(conditions=1, prompts=1)
    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance)

    post_init.connect(receiver, sender=Study)
    try:
        built, _ = rows.instance(Study, _row(Study, study.pk))
    finally:
        post_init.disconnect(receiver, sender=Study)
    assert seen == [built]
