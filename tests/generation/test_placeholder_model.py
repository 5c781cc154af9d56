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


# --- judges and questionnaire subjects: the test model answers in the form asked -------------------------------


def test_the_test_model_judges_a_rating_study_on_its_scale_through_the_judge_s_machinery(test_model):
    from generation.judge_models import JudgeRating
    from generation.services import judging
    from generation.services.running import run_until_settled

    from .judge_helpers import make_judge

    study = make_study(provider=test_model, n_prompts=6)
    conditions = generation_conditions(study=study)
    generation_run_in_process(
        item_ids=generation_start(study=study, conditions=conditions, dispatch=False).item_ids, threads=1
    )
    Response.objects.filter(condition__name="human", prompt__in=study.prompts.all()[:3]).update(text="ok.")
    judge = make_judge(study, test_model, model="test-model", max_tokens=8)
    started = judging.judge_start(judge=judge, dispatch=False)
    outcomes = [
        run_until_settled(lambda i=i: judging.judge_rating_run(rating_id=i)).status
        for i in started.rating_ids
    ]
    assert outcomes == ["done"] * 12  # 6 human and 6 test-model replies, each read on the first try
    ratings = JudgeRating.objects.filter(judge=judge).select_related("response")
    assert {r.attempts for r in ratings} == {1}
    assert {r.value for r in ratings} <= {o["value"] for o in study.scale}
    by_text = {}
    for r in ratings:
        by_text.setdefault(r.response.text == "ok.", []).append(r.value)
    # a caring reply is rated higher on average than a curt one
    assert sum(by_text[False]) / len(by_text[False]) > sum(by_text[True]) / len(by_text[True])


def test_the_test_model_judges_a_pairwise_study_s_pairs_in_both_orders(test_model):
    from generation.judge_models import JudgeRating
    from generation.services import judging
    from generation.services.running import run_until_settled
    from tests.factories import pairwise_study_build

    from .judge_helpers import make_judge

    study = pairwise_study_build(conditions=3, prompts=8, items_per_participant=3, quota_per_condition=50)
    for response in Response.objects.filter(condition__study=study).select_related("condition"):
        long = response.condition.position == 0
        response.text = (
            "I'm so sorry, that sounds really painful; it makes sense you feel this way." if long else "Oh."
        )
        response.save(update_fields=["text"])
    judge = make_judge(study, test_model, model="test-model", max_tokens=8)
    started = judging.judge_start(judge=judge, dispatch=False)
    outcomes = [
        run_until_settled(lambda i=i: judging.judge_rating_run(rating_id=i)).status
        for i in started.rating_ids
    ]
    assert outcomes and set(outcomes) == {"done"}
    verdicts = list(
        JudgeRating.objects.filter(judge=judge).select_related("response__condition", "versus__condition")
    )
    assert all(v.attempts == 1 and v.value in (1, 2, 3) for v in verdicts)
    long_won = sum(
        (v.value == 1 and v.response.condition.position == 0)
        or (v.value == 2 and v.versus.condition.position == 0)
        for v in verdicts
    )
    long_lost = sum(
        (v.value == 2 and v.response.condition.position == 0)
        or (v.value == 1 and v.versus.condition.position == 0)
        for v in verdicts
    )
    assert long_won > long_lost  # the longer, caring reply is preferred more often than not
    same = [v for v in verdicts if v.response.condition.position != 0 and v.versus.condition.position != 0]
    assert same and {v.value for v in same} == {3}  # two equal replies: about the same


def test_the_test_model_s_questionnaire_answers_are_one_number_per_item_in_range():
    from generation.providers import placeholder
    from generation.questionnaire import SITUATION_PREAMBLE
    from generation.questionnaire_replies import reply_parse

    assert SITUATION_PREAMBLE.startswith(placeholder._SCENARIO)  # it tells a scenario from the baseline
    items = ["Interested", "Distressed", "Excited", "Upset", "Proud", "Afraid", "I worry."]
    listed = "\n".join(f"{n}. {text}" for n, text in enumerate(items, start=1))
    baseline = "You can only reply the numbers from 1 to 5. Please score all of the following one by one:"
    scenario = SITUATION_PREAMBLE.format(text="Your car was towed.")
    for prompt in (baseline, f"{baseline} {scenario}"):
        values = reply_parse(
            text=placeholder_reply({"messages": [{"role": "user", "content": f"{prompt}\n{listed}"}]}),
            labels=items,
            scale_min=1,
            scale_max=5,
        )
        assert len(values) == 7 and all(1 <= v <= 5 for v in values)
    zero_to_three = reply_parse(
        text=placeholder_reply({"messages": [{"role": "user", "content": f"Answer from 0 to 3.\n{listed}"}]}),
        labels=items,
        scale_min=0,
        scale_max=3,
    )
    assert all(0 <= v <= 3 for v in zero_to_three)
