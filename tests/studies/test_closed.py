"""Closed means closed, and nothing is deleted silently: conditions of a launched study cannot be added, and a
condition with responses is never deleted on its own (directly, in the admin)."""

import pytest
from django.db import transaction
from django.urls import reverse

from studies.design import ConditionDeleteError, FrozenDesignError
from studies.models import Condition, Response, Study
from studies.services import study_close, study_closed_problem, study_launch

from .test_design import change_form_data, ready_study

pytestmark = pytest.mark.django_db


def test_a_condition_with_responses_is_not_deleted_on_its_own():
    study = ready_study()
    gpt = study.conditions.get(name="gpt4")
    # (the refusal rolls back the deletion's transaction; here a savepoint of the test's)
    with pytest.raises(ConditionDeleteError, match="4 response"), transaction.atomic():
        gpt.delete()
    with pytest.raises(ConditionDeleteError), transaction.atomic():
        study.conditions.filter(name="gpt4").delete()
    assert Response.objects.filter(condition=gpt).count() == 4
    empty = Condition.objects.create(study=study, name="unused")
    empty.delete()  # nothing goes with it: allowed in a draft
    study.delete()  # the whole study, with everything it has
    assert not Response.objects.exists()


def test_a_closed_study_refuses_new_conditions_and_deletions():
    study = ready_study()
    study_launch(study=study)
    study_close(study=study)
    assert "study_extend" in study_closed_problem(study=study)
    with pytest.raises(FrozenDesignError, match="study_extend"):
        Condition.objects.create(study=study, name="claude", kind=Condition.Kind.LLM)
    with pytest.raises(FrozenDesignError), transaction.atomic():
        Condition.objects.filter(study=study, name="gpt4").delete()
    assert study.conditions.count() == 2 and Response.objects.filter(prompt__study=study).count() == 8


def test_a_live_study_is_not_closed():
    study = ready_study()
    study_launch(study=study)
    assert study_closed_problem(study=study) is None


def test_the_admin_refuses_to_delete_a_draft_condition_with_responses(staff_client):
    study = ready_study()
    data = change_form_data(staff_client, study)
    prefix = next(k for k in data if k.endswith("TOTAL_FORMS") and "conditions" in k).removesuffix(
        "-TOTAL_FORMS"
    )
    response = staff_client.post(
        reverse("admin:studies_study_change", args=[study.pk]), {**data, f"{prefix}-1-DELETE": "on"}
    )
    assert response.status_code == 400 and "has 4 response(s)" in response.content.decode()
    assert Study.objects.get(pk=study.pk).conditions.count() == 2
