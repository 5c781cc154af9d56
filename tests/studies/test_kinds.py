"""The built-in kinds through the kind interface: settings moved off Study (migration and admin), steps, and
the one dispatch on the kind."""

import re

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from studies.kinds import kind_named, participant_steps
from studies.models import Instrument, QuestionnaireSettings, Study
from tests.factories import StudyFactory, questionnaire_study_create

BEFORE = [("studies", "0002_seed_emotions")]
AFTER = [("studies", "0003_kinds_questionnaire_settings")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_every_questionnaire_setting_off_the_study_and_back():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    instrument = old.get_model("studies", "Instrument").objects.create(name="PANAS-m")
    OldStudy = old.get_model("studies", "Study")
    OldStudy.objects.create(
        slug="q", title="q", kind="questionnaire", instrument=instrument, ask_demographics=True,
        randomise_item_order=False, llm_default_runs=7, llm_evoked_runs=3, significance_level=0.05,
    )  # fmt: skip
    OldStudy.objects.create(slug="r", title="r", kind="rating")

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    settings = new.get_model("studies", "QuestionnaireSettings").objects.get(study__slug="q")
    assert (
        settings.instrument_id,
        settings.ask_demographics,
        settings.randomise_item_order,
        settings.llm_default_runs,
        settings.llm_evoked_runs,
        settings.significance_level,
    ) == (instrument.pk, True, False, 7, 3, 0.05)
    assert not new.get_model("studies", "QuestionnaireSettings").objects.filter(study__slug="r").exists()

    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)  # and back: the values return to the study
    back = executor.loader.project_state(BEFORE).apps.get_model("studies", "Study").objects.get(slug="q")
    assert (back.instrument_id, back.llm_default_runs, back.significance_level) == (instrument.pk, 7, 0.05)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db
def test_a_questionnaire_study_without_settings_reads_the_defaults_and_writes_nothing():
    study = StudyFactory(kind="questionnaire")
    settings = kind_named("questionnaire").settings(study)
    assert settings.pk is None and settings.llm_default_runs == 50 and settings.instrument_id is None
    assert not QuestionnaireSettings.objects.exists()


@pytest.mark.django_db
def test_each_kind_declares_its_steps_between_the_spines_consent_and_done():
    rating = StudyFactory(kind="rating", ask_teq=True)
    assert participant_steps(rating) == ["consent", "instructions", "teq", "items", "done"]
    questionnaire = questionnaire_study_create(slug="q", title="q", ask_demographics=True)
    assert participant_steps(questionnaire) == [
        "consent",
        "demographics",
        "q_default",
        "q_situation",
        "q_evoked",
        "done",
    ]


@pytest.mark.django_db
def test_the_admin_shows_a_kinds_own_settings_only_on_its_studies(staff_client):
    questionnaire = questionnaire_study_create(
        slug="q", title="q", instrument=Instrument.objects.create(name="PANAS-a"), llm_default_runs=12
    )
    page = staff_client.get(reverse("admin:studies_study_change", args=[questionnaire.pk])).content.decode()
    assert "questionnaire_settings-0-llm_default_runs" in page and 'value="12"' in page
    rating = StudyFactory(kind=Study.Kind.RATING)
    page = staff_client.get(reverse("admin:studies_study_change", args=[rating.pk])).content.decode()
    assert "questionnaire_settings" not in page


@pytest.mark.django_db
def test_the_rating_fields_show_on_rating_studies_only(staff_client):
    rating = StudyFactory(kind=Study.Kind.RATING)
    page = staff_client.get(reverse("admin:studies_study_change", args=[rating.pk])).content.decode()
    # The rating kind's own settings (kinds/rating/models.py) on its inline; its other fields on the study.
    assert 'name="rating_settings-0-scale_question"' in page and 'name="rating_settings-0-ask_teq"' in page
    assert re.search(r'name="scale_\w+"', page)  # the scale's inputs
    questionnaire = questionnaire_study_create(slug="q2", title="q2")
    page = staff_client.get(reverse("admin:studies_study_change", args=[questionnaire.pk])).content.decode()
    assert "scale_question" not in page and not re.search(r'name="scale_\w+"', page)
    assert 'name="consent_text"' in page
    page = staff_client.get(reverse("admin:studies_study_add")).content.decode()
    assert re.search(r'name="scale_\w+"', page)  # the kind is chosen on this page: every kind's fields


@pytest.mark.django_db
def test_the_status_summary_is_the_kinds(staff_client):
    questionnaire = questionnaire_study_create(
        slug="q3", title="q3", instrument=Instrument.objects.create(name="PANAS-s")
    )
    page = staff_client.get(reverse("admin:studies_study_status", args=[questionnaire.pk])).content.decode()
    assert "instrument PANAS-s · 0 situations" in page and "prompts" not in page
