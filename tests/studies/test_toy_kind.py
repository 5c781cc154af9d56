"""A fourth study kind, the toy (tests/toy_kind/): one package, installed by one line of config/settings.py in the
test environment, no other file touched.

It proves the spine needs nothing from a kind beyond its package: a participant enrols over HTTP, goes through the
shared consent page and the toy's own step, whose answer goes through the spine's answer protocol exactly once;
the study launches with the spine's checks, its numbers show in the status counts (selector, command and admin
page), its answers in the `ratings` export and its analysis in `manage.py analyze`.

The toy declares none of the other capabilities (`StudyKind.analysis_page`, `corpus_import`, `judged`,
`power_planner`, `questionnaire`): every page and service that offers one leaves the toy out, with a clear
answer, and a toy that declares them gets them with no other code touched.
"""

import io
import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.urls import reverse

from analysis import judge_ahead, snapshots
from analysis.study_power import StudyPowerError, study_power_plan
from generation.judge_models import Judge
from studies.importers import CorpusImportError, corpus_import
from studies.kinds import (
    NoQuestionnaire,
    kind_named,
    questionnaire_with_instrument,
    register,
    step_choices,
    unregister,
)
from studies.models import Participant, Study
from studies.selectors import study_status
from studies.services import study_launch
from tests.factories import ConditionFactory, StudyFactory
from tests.ratings.helpers import current_step, enter, post_step, step_url
from tests.toy_kind.kind import TOY_STEP, ToyKind
from tests.toy_kind.models import ToyWave

pytestmark = pytest.mark.django_db


@pytest.fixture
def toy_kind():
    return kind_named("toy")


@pytest.fixture
def toy_study(toy_kind):
    study = StudyFactory(slug="toy", kind="toy", completion_code="TOYDONE", quota_per_condition=5)
    ConditionFactory(study=study, name="only")
    return study


def test_the_toy_kind_is_registered_beside_the_built_in_ones(toy_kind):
    assert kind_named("toy") is toy_kind
    assert {"rating", "questionnaire", "toy"} <= {name for name, _ in Study._meta.get_field("kind").choices}
    assert (TOY_STEP, "Wave") in step_choices()
    assert ("q_evoked", "Questionnaire (after the situation)") in Participant._meta.get_field("step").choices


def test_a_participant_enrols_waves_and_gets_the_code_over_http(client, toy_study):
    study_launch(study=toy_study)
    page = enter(client, toy_study, "TOY1").content.decode()
    assert "Information and consent" in page  # the spine's consent page, shared by every kind
    assert post_step(client, toy_study, decision="agree").status_code == 302
    step, response = current_step(client, toy_study)
    assert step == TOY_STEP and "Wave at the toy" in response.content.decode()
    assert client.post(step_url(toy_study), {"step": TOY_STEP}).status_code == 400  # the toy's own check
    assert client.post(step_url(toy_study), {"step": TOY_STEP, "wave": "left"}).status_code == 302
    assert "TOYDONE" in client.get(step_url(toy_study)).content.decode()
    participant = Participant.objects.get(external_id="TOY1")
    assert (participant.status, participant.step, participant.completion_code) == (
        "completed",
        "done",
        "TOYDONE",
    )
    # A second wave (back button) finds the participant elsewhere: nothing changes.
    assert client.post(step_url(toy_study), {"step": TOY_STEP, "wave": "right"}).status_code == 302
    participant.refresh_from_db()
    assert participant.status == "completed"
    assert list(ToyWave.objects.values_list("participant__external_id", "hand")) == [("TOY1", "left")]


def test_the_toy_study_shows_its_own_numbers_in_the_status_counts(client, toy_study, admin_client):
    study_launch(study=toy_study)
    for pid, hand in (("A", "left"), ("B", "right")):
        visitor = client.__class__()
        enter(visitor, toy_study, pid)
        post_step(visitor, toy_study, decision="agree")
        visitor.post(step_url(toy_study), {"step": TOY_STEP, "wave": hand})
    status = study_status(study=toy_study)
    assert status["columns"] == [{"key": "waved", "header": "waved"}]
    assert status["conditions"][0]["waved"] == 2 and status["totals"]["waved"] == 2
    out = io.StringIO()
    call_command("study_status", "toy", stdout=out)
    header = next(line for line in out.getvalue().splitlines() if line.startswith("condition"))
    assert header.split()[-1] == "waved"
    out = io.StringIO()
    call_command("study_status", "toy", "--json", stdout=out)
    assert json.loads(out.getvalue())["conditions"][0]["waved"] == 2
    page = admin_client.get(reverse("admin:studies_study_status", args=[toy_study.pk])).content.decode()
    assert "Waved" in page


class ToyWithCapabilities(ToyKind):
    """The toy again, declaring the capabilities it takes from the rating kind's implementations."""

    name = "toy_capable"
    label = "Toy study with an analysis, a corpus and judges"
    analysis_page = "analysis:dashboard"
    corpus_import = True
    judged = True


def _admin_pages(admin_client, study) -> tuple[str, str]:
    change = admin_client.get(reverse("admin:studies_study_change", args=[study.pk])).content.decode()
    listing = admin_client.get(reverse("admin:studies_study_changelist")).content.decode()
    return change, listing


def test_a_kind_without_capabilities_is_offered_none_of_them(admin_client, toy_study):
    study_launch(study=toy_study)
    change, listing = _admin_pages(admin_client, toy_study)
    analysis_url = reverse("analysis:dashboard", args=[toy_study.slug])
    assert "Live status" in change  # the spine's pages stay
    # No link to any analysts' page of the study (the admin's own "Analysis" section, its API tokens, stays).
    for absent in (f"/analysis/{toy_study.slug}/", "Import corpus", "Generate LLM responses", analysis_url):
        assert absent not in change
    assert analysis_url not in listing and "?study=toy" not in listing
    assert reverse("analysis:emotionbench", args=[toy_study.slug]) not in listing
    # The analysts' list leaves it out; its dashboard and a judge's page answer 404.
    assert toy_study.title not in admin_client.get(reverse("analysis:index")).content.decode()
    assert admin_client.get(analysis_url).status_code == 404
    assert admin_client.get(reverse("analysis:judge_report", args=[toy_study.slug, "j"])).status_code == 404
    # Nothing computes ahead for it, and the services refuse it by name.
    assert snapshots.snapshots_refresh() == 0 and judge_ahead.judge_reports_refresh() == 0
    with pytest.raises(StudyPowerError, match="toy study: its kind plans no power"):
        study_power_plan(study=toy_study)
    with pytest.raises(NoQuestionnaire, match="'toy' is not a questionnaire study"):
        questionnaire_with_instrument(toy_study)
    with pytest.raises(ValidationError) as refused:
        Judge(study=toy_study, name="j", model="m", rubric="{response}").clean()
    assert refused.value.message_dict["study"] == ["Judges do not rate toy studies."]


def test_a_corpus_is_refused_by_a_kind_without_one(toy_kind):
    StudyFactory(slug="toy-draft", kind="toy")
    with pytest.raises(CorpusImportError, match="toy study: its kind takes no corpus"):
        corpus_import(study_slug="toy-draft", data=b"irrelevant")


def test_a_kind_that_declares_capabilities_gets_them(admin_client):
    kind = register(ToyWithCapabilities())
    try:
        study = StudyFactory(slug="toy-capable", kind=kind.name)
        ConditionFactory(study=study, name="only")
        change, listing = _admin_pages(admin_client, study)
        analysis_url = reverse("analysis:dashboard", args=[study.slug])
        import_url = reverse("admin:studies_study_import") + "?study=toy-capable"
        assert f'href="{analysis_url}"' in change and f'href="{import_url}"' in change
        assert f'href="{analysis_url}"' in listing and f'href="{import_url}"' in listing
        index = admin_client.get(reverse("analysis:index")).content.decode()
        assert f'<a href="{analysis_url}">{study.title}</a>' in index
        Judge(study=study, name="j", model="m", rubric="").clean()  # a judge of it is valid
    finally:
        unregister(kind.name)


def test_the_toy_answers_are_in_the_export_and_its_analysis(client, toy_study, tmp_path):
    study_launch(study=toy_study)
    for pid, hand in (("A", "left"), ("B", "left"), ("C", "right")):
        visitor = client.__class__()
        enter(visitor, toy_study, pid)
        post_step(visitor, toy_study, decision="agree")
        visitor.post(step_url(toy_study), {"step": TOY_STEP, "wave": hand})
    call_command(
        "export", "toy", "--what", "ratings", "--out", str(tmp_path / "waves.csv"), stderr=io.StringIO()
    )
    lines = (tmp_path / "waves.csv").read_text().splitlines()
    assert lines[0] == "participant,condition,hand,waved_at"
    assert sorted(line.split(",")[2] for line in lines[1:]) == ["left", "left", "right"]
    out = io.StringIO()
    call_command("analyze", "toy", "--out", str(tmp_path / "analysis"), stdout=out)
    assert "toy: 3 waves" in out.getvalue()
    assert (tmp_path / "analysis" / "waves.txt").read_text() == "only left: 2\nonly right: 1\n"
