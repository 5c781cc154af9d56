"""A new study and the demos start with the traps that cost people nothing (NEW_STUDY_TRAPS)."""

import io
import re

import pytest
from django.core.management import call_command

from studies.authenticity_models import NEW_STUDY_TRAPS
from studies.models import Study

pytestmark = pytest.mark.django_db


def test_the_admin_form_for_a_new_study_starts_with_the_hidden_instruction_on(admin_client):
    page = admin_client.get("/admin/studies/study/add/").content.decode()
    assert re.search(r'<input type="checkbox" name="trap_hidden_instruction"[^>]* checked>', page)
    assert re.search(r'<input type="number" name="trap_repeat_items" value="2"', page)
    assert not re.search(r'<input type="checkbox" name="trap_picture"[^>]* checked>', page)
    assert NEW_STUDY_TRAPS == {"trap_hidden_instruction": True, "trap_repeat_items": 2}


def test_the_demos_start_with_the_hidden_instruction_and_consistency_pairs():
    call_command("seed_demo", stdout=io.StringIO())
    # Every demo participants take (the published sample is imported ratings: nobody takes it).
    traps = dict(
        Study.objects.exclude(slug="published-sample").values_list("slug", "trap_hidden_instruction")
    )
    assert traps and all(traps.values()), traps
    rating = Study.objects.get(slug="demo")
    assert (rating.trap_repeat_items, rating.trap_picture) == (
        2,
        False,
    )  # the picture: the researcher's choice
    from kinds.questionnaire.demo import QUESTIONNAIRE_SLUG

    questionnaire = Study.objects.get(slug=QUESTIONNAIRE_SLUG)
    assert (questionnaire.trap_repeat_items, questionnaire.trap_picture) == (2, False)
