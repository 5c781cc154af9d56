"""An LLM subject's provider errors go through the shared retry loop (generation.services.running): a 429's
Retry-After is waited out, and a provider that keeps failing is given up on after its max_attempts."""

import json
import re
import time

import pytest
from werkzeug import Response as WResponse

from generation.models import LLMConditionConfig
from generation.questionnaire import questionnaire_generate
from generation.questionnaire_models import QuestionnaireExchange
from studies.models import Condition, Instrument, QuestionnaireRun
from tests.factories import questionnaire_study_create

from .test_llm_subjects import make_provider, openai_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_run_study(imported_basics, httpserver, api_key):
    study = questionnaire_study_create(
        slug="eb-retry",
        title="retries",
        instrument=Instrument.objects.get(name="PANAS"),
        llm_default_runs=1,
        llm_evoked_runs=0,
    )
    condition = Condition.objects.create(study=study, name="flaky", kind=Condition.Kind.LLM)
    LLMConditionConfig.objects.create(condition=condition, provider=make_provider(httpserver), model="m")
    return study


def test_a_429_retry_after_is_waited_out_then_the_run_is_stored(one_run_study, httpserver):
    times = []

    def handler(request):
        times.append(time.monotonic())
        if len(times) == 1:
            return WResponse(
                json.dumps({"error": {"message": "slow down"}}), status=429, headers={"Retry-After": "1"}
            )
        asked = json.loads(request.get_data())["messages"][-1]["content"]
        text = "\n".join(f"{n}. 3" for n in re.findall(r"^(\d+)\. ", asked, re.MULTILINE))
        return WResponse(json.dumps(openai_body(text)), content_type="application/json")

    httpserver.expect_request("/v1/chat/completions").respond_with_handler(handler)
    summary = questionnaire_generate(study=one_run_study, backoff_base=0.01)
    assert summary.failed == [] and summary.stored == 1
    assert times[1] - times[0] >= 1.0
    outcomes = list(QuestionnaireExchange.objects.order_by("attempt").values_list("outcome", flat=True))
    assert outcomes == ["provider_error", "parsed"]
    assert QuestionnaireRun.objects.get().answers.count() == 20


def test_a_provider_that_keeps_failing_is_given_up_on_after_max_attempts(one_run_study, httpserver):
    httpserver.expect_request("/v1/chat/completions").respond_with_data("down", status=503)
    summary = questionnaire_generate(study=one_run_study, backoff_base=0.01)
    assert summary.stored == 0 and len(summary.failed) == 1
    assert "provider error" in summary.failed[0] and "gave up after 3 attempts" in summary.failed[0]
    assert QuestionnaireExchange.objects.filter(outcome="provider_error").count() == 3
    assert not QuestionnaireRun.objects.exists()
