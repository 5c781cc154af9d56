"""The judge's admin as a researcher uses it: configure (a bad rubric is refused, naming the placeholder), see what
would be sent, run, and follow progress, spend and errors on the judge's run page."""

import pytest
from django.urls import reverse

from generation.judge_models import Judge, JudgeRating
from generation.services import judging
from generation.services.running import run_until_settled

from .conftest import json_response, make_provider, make_study
from .judge_helpers import judge_reply_body, make_judge

pytestmark = pytest.mark.django_db
CHAT = "/v1/chat/completions"


def test_a_rubric_with_an_unknown_placeholder_is_refused_in_the_admin(staff_client, httpserver, api_key):
    provider = make_provider(httpserver)
    study = make_study(provider=provider, n_prompts=1)
    page = staff_client.get(reverse("admin:generation_judge_add") + f"?study={study.pk}").content.decode()
    assert "Answer with exactly one word" in page  # the default rubric
    response = staff_client.post(
        reverse("admin:generation_judge_add"),
        {
            "study": study.pk,
            "name": "j",
            "provider": provider.pk,
            "model": "judge-test",
            "rubric": "Rate {response} for {reader}.",
            "temperature": 0,
            "max_tokens": 8,
            "n_samples": 1,
        },
    )
    assert response.status_code == 400  # the form again, with the reason
    assert "Unknown placeholder(s) in the rubric: {reader}" in response.content.decode()
    assert not Judge.objects.exists()


def test_the_judge_page_shows_what_it_sends_and_links_to_its_run_page(staff_client, httpserver, api_key):
    provider = make_provider(httpserver)
    study = make_study(provider=provider, n_prompts=1)
    judge = make_judge(study, provider)
    page = staff_client.get(reverse("admin:generation_judge_change", args=[judge.pk])).content.decode()
    response = study.prompts.get().responses.get()
    assert f"The reply: {response.text}" in page
    assert reverse("admin:generation_judge_run", args=[judge.pk]) in page
    generation_page = staff_client.get(reverse("admin:generation_study", args=[study.pk])).content.decode()
    assert reverse("admin:generation_judge_run", args=[judge.pk]) in generation_page
    assert len(httpserver.log) == 0


def test_run_page_runs_and_shows_progress_spend_and_the_most_common_errors(
    staff_client, httpserver, api_key, fast_retries
):
    provider = make_provider(httpserver, max_attempts=2)
    study = make_study(provider=provider, n_prompts=3)
    judge = make_judge(study, provider)
    url = reverse("admin:generation_judge_run", args=[judge.pk])

    page = staff_client.get(url).content.decode()
    assert "0 of 3 rated" in page and "Run judge" in page and "Submit pending as a batch" in page
    assert "Before sending: 3 calls left" in page and "through the Batch API" in page

    staff_client.post(url, {"action": "run", "condition": "human"})  # rows created; dispatch waits for commit
    assert JudgeRating.objects.filter(judge=judge, status="pending").count() == 3
    replies = iter(["Good", "Perfectly fine reply", "Perfectly fine reply", "Bad"])
    httpserver.expect_request(CHAT).respond_with_handler(
        lambda request: json_response(judge_reply_body(next(replies)))
    )
    for rating_id in JudgeRating.objects.order_by("id").values_list("id", flat=True):
        run_until_settled(lambda i=rating_id: judging.judge_rating_run(rating_id=i))

    page = staff_client.get(url).content.decode()
    assert "2 of 3 rated (67%)" in page
    assert "Failed ×1: unparseable: the reply names none of the labels" in page
    assert "Perfectly fine reply" in page  # the last reply of the failed rating
    assert "Spend so far: <strong>$0.0031</strong>" in page  # 4 calls × $0.00077, the failed ones included
    assert len(httpserver.log) == 4

    response = staff_client.post(url, {"action": "run", "condition": "gpt9"}, follow=True)
    assert "no condition named &#x27;gpt9&#x27;" in response.content.decode()
