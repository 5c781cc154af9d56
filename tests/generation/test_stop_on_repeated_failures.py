"""A condition whose every call fails the same permanent way (a refused key, a model or path the endpoint does
not serve) stops after three such failures instead of spending every item on it; the admin and the terminal say
why; fixing the cause and retrying finishes the run. Refusals of one item's text never stop a run."""

import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from generation.models import GenerationItem, GenerationJob
from generation.services.dispatch import generation_retry_failed, generation_run_in_process, generation_start
from studies.models import Response

from .conftest import json_response, make_provider, make_study, openai_body

CHAT = "/v1/chat/completions"
REFUSED = {"error": {"message": "Incorrect API key provided.", "code": "invalid_api_key"}}


def statuses(condition_name="gpt"):
    return sorted(
        GenerationItem.objects.filter(condition__name=condition_name).values_list("status", flat=True)
    )


@pytest.mark.django_db
def test_three_refused_keys_stop_the_condition_and_the_admin_says_why(
    staff_client, openai_provider, httpserver
):
    study = make_study(provider=openai_provider, n_prompts=10, human=False)
    httpserver.expect_request(CHAT).respond_with_json(REFUSED, status=401)
    out = StringIO()
    call_command(
        "generate_responses", study.slug, "--in-process", "--threads", "1", "--no-progress", stdout=out
    )

    assert len(httpserver.log) == 3
    assert statuses() == ["cancelled"] * 7 + ["failed"] * 3
    job = GenerationJob.objects.get()
    assert job.status == GenerationJob.Status.STOPPED
    assert "Stopped after 3 items failed the same way" in job.stopped_reason
    assert "HTTP 401" in job.stopped_reason and "key" in job.stopped_reason
    assert "Stopped after 3 items failed the same way" in out.getvalue()
    page = staff_client.get(reverse("admin:generation_study", args=[study.id])).content.decode()
    assert "generation-stopped" in page and "Test connection" in page

    # The key is fixed: retry the failed ones, resume the cancelled ones, and the run completes.
    httpserver.clear_all_handlers()
    httpserver.expect_request(CHAT).respond_with_json(openai_body())
    conditions = list(study.conditions.all())
    failed = generation_retry_failed(conditions=conditions, dispatch=False)
    resumed = generation_start(study=study, conditions=conditions, dispatch=False)
    generation_run_in_process(item_ids=sorted(set(failed) | set(resumed.item_ids)), threads=1)
    assert statuses() == ["done"] * 10 and Response.objects.count() == 10
    page = staff_client.get(reverse("admin:generation_study", args=[study.id])).content.decode()
    assert "generation-stopped" not in page


@pytest.mark.django_db
def test_a_model_the_endpoint_does_not_serve_stops_the_run_but_refused_texts_do_not(api_key, httpserver):
    provider = make_provider(httpserver)
    study = make_study(provider=provider, n_prompts=6, conditions=("gpt", "filtered"), human=False)

    def answer(request):
        if b"filtered" in request.get_data():  # never: both conditions send the same prompts
            raise AssertionError
        return json_response({"error": {"message": "The model `gpt-test` does not exist"}}, status=404)

    httpserver.expect_request(CHAT).respond_with_handler(answer)
    gpt = study.conditions.get(name="gpt")
    result = generation_start(study=study, conditions=[gpt], dispatch=False)
    generation_run_in_process(item_ids=result.item_ids, threads=1)
    assert statuses("gpt") == ["cancelled"] * 3 + ["failed"] * 3
    assert "model_not_found" in GenerationJob.objects.get(condition=gpt).stopped_reason

    httpserver.clear_all_handlers()
    httpserver.expect_request(CHAT).respond_with_json(openai_body("", finish="content_filter"))
    filtered = study.conditions.get(name="filtered")
    result = generation_start(study=study, conditions=[filtered], dispatch=False)
    generation_run_in_process(item_ids=result.item_ids, threads=1)
    assert statuses("filtered") == ["failed"] * 6  # each text refused on its own: every item was tried
    assert GenerationJob.objects.get(condition=filtered).status == GenerationJob.Status.RUNNING


@pytest.mark.django_db(transaction=True)
def test_eight_workers_failing_at_once_stop_the_run_once_and_leave_nothing_pending(
    threaded_server, api_key, requires_postgres
):
    provider = make_provider(threaded_server)
    study = make_study(provider=provider, n_prompts=40, human=False)

    def refused(request):
        time.sleep(0.05)
        return json_response(REFUSED, status=401)

    threaded_server.expect_request(CHAT).respond_with_handler(refused)
    result = generation_start(study=study, conditions=list(study.conditions.all()), dispatch=False)
    generation_run_in_process(item_ids=result.item_ids, threads=8)

    calls = len(threaded_server.log)
    counts = statuses()
    # Every item settled: failed after its one call, or cancelled unsent. At most the calls already in flight
    # when the third failure was seen went out after it.
    assert set(counts) == {"failed", "cancelled"}
    assert counts.count("failed") == calls
    assert 3 <= calls <= 3 + 2 * 8 < 40
    job = GenerationJob.objects.get()
    assert job.status == GenerationJob.Status.STOPPED and job.stopped_reason.startswith("Stopped after ")
