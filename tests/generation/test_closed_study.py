"""A closed study is closed: nothing is generated for it, and the refusal points to follow-up waves."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from generation.services.dispatch import generation_start
from generation.services.prompts import GenerationSetupError, generation_problems
from studies.models import Response, Study

from .conftest import make_study

pytestmark = pytest.mark.django_db


def test_generating_for_a_closed_study_is_refused_with_a_pointer_to_waves(openai_provider):
    study = make_study(provider=openai_provider)
    Study.objects.filter(pk=study.pk).update(state=Study.State.CLOSED)
    study.refresh_from_db()
    conditions = list(study.conditions.filter(name="gpt"))
    assert any("study_extend" in p for p in generation_problems(conditions=conditions))
    with pytest.raises(GenerationSetupError, match="closed"):
        generation_start(study=study, conditions=conditions, dispatch=False)
    with pytest.raises(CommandError, match="study_extend"):
        call_command("generate_responses", study.slug, "--in-process", "--no-progress", stdout=StringIO())
    assert not Response.objects.filter(condition__name="gpt").exists()


def test_a_live_study_still_generates_its_missing_items(openai_provider):
    study = make_study(provider=openai_provider)
    Study.objects.filter(pk=study.pk).update(state=Study.State.LIVE)
    assert generation_problems(conditions=list(study.conditions.filter(name="gpt"))) == []
