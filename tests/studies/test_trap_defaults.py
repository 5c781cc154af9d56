"""A new study and the demos start with the traps that cost people nothing (NEW_STUDY_TRAPS); the admin shows the
traps a study's kind offers (`StudyKind.traps`), each once, in one fieldset."""

import io
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from studies.authenticity_models import NEW_STUDY_TRAPS
from studies.kinds import kind_of
from studies.kinds.base import TRAP_FIELDS
from studies.models import Study
from tests.factories import StudyFactory

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


def _trap_inputs(page: str) -> list[str]:
    return re.findall(r'<input [^>]*name="(trap_[a-z_]+)"', page)


def test_the_new_study_form_offers_each_trap_once_in_its_own_fieldset(admin_client):
    """Every kind's traps on the add page, where the kind is still to be chosen, but each field once."""
    page = admin_client.get("/admin/studies/study/add/").content.decode()
    assert _trap_inputs(page) == list(TRAP_FIELDS)
    traps = page[page.index("Authenticity traps") :]
    assert all(f'name="{name}"' in traps[: traps.index("</fieldset>")] for name in TRAP_FIELDS)


@pytest.mark.parametrize(
    ("kind", "offered"),
    [
        ("rating", list(TRAP_FIELDS)),
        ("pairwise", list(TRAP_FIELDS)),
        ("questionnaire", list(TRAP_FIELDS)),
        ("chat", ["trap_hidden_instruction"]),  # no items to repeat, no page for a picture among them
    ],
)
def test_a_studys_page_offers_the_traps_its_kind_offers(admin_client, kind, offered):
    study = StudyFactory(kind=kind)
    assert list(kind_of(study).traps) == offered
    page = admin_client.get(reverse("admin:studies_study_change", args=[study.pk])).content.decode()
    assert _trap_inputs(page) == offered
