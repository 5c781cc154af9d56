"""The test model: a provider kind that answers at once, here, with no network and no key; its replies are
placeholders, marked on the generation page, the review list, the analysis and the export, and a study on it
launches only as a confirmed dry run."""

import csv
import io
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from analysis.design import dry_run_of
from analysis.exports import export_lines
from generation.models import Provider, ResponseProvenance
from generation.providers.placeholder import placeholder_reply
from generation.services.dispatch import generation_run_in_process, generation_start
from generation.services.prompts import generation_conditions
from studies.models import Response, Study
from studies.services import StudyLaunchError, study_launch, study_launch_problems

from .conftest import make_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def test_model():
    provider = Provider(name="test-model", kind="test", max_concurrency=4, requests_per_minute=6000)
    provider.full_clean()  # the admin's choice of kind; no base URL, no key
    provider.save()
    return provider


def test_the_test_model_generates_distinct_plausible_replies_without_a_network(test_model):
    study = make_study(provider=test_model, n_prompts=6)
    conditions = generation_conditions(study=study)
    result = generation_start(study=study, conditions=conditions, dispatch=False)
    generation_run_in_process(item_ids=result.item_ids, threads=1)
    texts = list(Response.objects.filter(condition=conditions[0]).values_list("text", flat=True))
    assert len(texts) == 6 and len(set(texts)) >= 5 and all(len(t.split()) >= 10 for t in texts)
    row = ResponseProvenance.objects.filter(response__condition=conditions[0]).first()
    assert row.provider_kind == "test" and "placeholder" in row.model_returned and row.cost == 0
    assert placeholder_reply(row.request) == row.response.text  # the same request, the same reply


def test_placeholder_replies_are_marked_on_every_page_and_in_the_export(staff_client, test_model):
    study = make_study(provider=test_model, n_prompts=2)
    conditions = generation_conditions(study=study)
    generation_run_in_process(
        item_ids=generation_start(study=study, conditions=conditions, dispatch=False).item_ids, threads=1
    )
    assert dry_run_of(study) == ["gpt"]
    page = staff_client.get(reverse("admin:generation_study", args=[study.pk])).content.decode()
    assert "Test model: placeholder replies" in page
    page = staff_client.get(reverse("admin:generation_generatedresponse_changelist")).content.decode()
    assert "Test model: placeholder reply" in page and "I miss him 0." in page  # and each response's prompt
    rows = list(csv.DictReader(io.StringIO("".join(export_lines(study=study, what="responses", rules=None)))))
    assert {r["placeholder_reply"] for r in rows if r["condition"] == "gpt"} == {"true"}
    assert {r["placeholder_reply"] for r in rows if r["condition"] == "human"} == {""}


def test_a_study_on_the_test_model_launches_only_as_a_confirmed_dry_run(staff_client, test_model):
    study = make_study(provider=test_model, n_prompts=3)
    conditions = generation_conditions(study=study)
    generation_run_in_process(
        item_ids=generation_start(study=study, conditions=conditions, dispatch=False).item_ids, threads=1
    )
    study.consent_text, study.completion_code = "You agree.", "DONE1"
    study.save()
    assert study_launch_problems(study=study) == []  # nothing else stops it
    with pytest.raises(StudyLaunchError, match="gpt answers with the test model"):
        study_launch(study=study)
    url = reverse("admin:studies_study_state", args=[study.pk, "launch"])
    page = staff_client.get(url).content.decode()
    assert 'name="dry_run"' in page and "required" in page, re.findall(r"<li>(.*?)</li>", page)
    staff_client.post(url, {})
    study.refresh_from_db()
    assert study.state == Study.State.DRAFT
    staff_client.post(url, {"dry_run": "yes"})
    study.refresh_from_db()
    assert study.state == Study.State.LIVE


def test_a_local_site_has_the_test_model_s_provider_once():
    for _ in range(2):
        call_command("seed_test_model", stdout=io.StringIO())
    assert list(Provider.objects.values_list("name", "kind")) == [("test-model", "test")]
