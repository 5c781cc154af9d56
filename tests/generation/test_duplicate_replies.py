"""Replies that are the same whatever the prompt (a canned answer) are flagged for review once the condition's
generation is done, and the launch check shows them; samples of one prompt may agree; different replies are
left alone. Against a loopback provider, through the in-process runner."""

import json
import re

import pytest

from generation.models import GenerationItem
from generation.services.dispatch import generation_start
from generation.services.running import (
    DUPLICATE_FLAG,
    condition_duplicates_flag,
    generation_item_run,
    run_until_settled,
)
from studies.models import Response
from studies.services import study_launch_problems

from .conftest import json_response, make_study, openai_body

CHAT = "/v1/chat/completions"


def generate_all(study):
    generation_start(study=study, conditions=list(study.conditions.filter(kind="llm")), dispatch=False)
    for item_id in GenerationItem.objects.values_list("id", flat=True):
        run_until_settled(lambda i=item_id: generation_item_run(item_id=i))


def reply_per_prompt(request):
    """A reply of its own for each prompt (the prompt's number is in its situation)."""
    number = re.search(r"\((\d+)\)", json.loads(request.get_data())["messages"][-1]["content"]).group(1)
    return json_response(openai_body(f"I'm so sorry about your dog, friend number {number}."))


@pytest.mark.django_db
def test_twenty_identical_canned_replies_are_flagged_and_block_the_launch(openai_provider, httpserver):
    study = make_study(provider=openai_provider, n_prompts=20, human=False)
    httpserver.expect_request(CHAT).respond_with_json(openai_body("I'm sorry to hear that."))
    generate_all(study)
    responses = Response.objects.filter(condition__study=study)
    assert responses.count() == 20
    assert set(responses.values_list("review", flat=True)) == {"flagged"}
    assert all(r.review_flags == [DUPLICATE_FLAG] for r in responses)
    assert "condition 'gpt' has 20 responses flagged for review" in " ".join(
        study_launch_problems(study=study)
    )


@pytest.mark.django_db
def test_near_identical_replies_differing_in_case_and_punctuation_are_flagged_too(
    openai_provider, httpserver
):
    study = make_study(provider=openai_provider, n_prompts=3, human=False)
    texts = iter(["I'm sorry to hear that.", "i'm SORRY to hear that!", "I’m sorry — to hear that"])
    httpserver.expect_request(CHAT).respond_with_handler(
        lambda request: json_response(openai_body(next(texts)))
    )
    generate_all(study)
    assert Response.objects.filter(review="flagged").count() == 3  # the same words, whatever the marks


@pytest.mark.django_db
def test_different_replies_and_agreeing_samples_of_one_prompt_are_not_flagged(openai_provider, httpserver):
    study = make_study(provider=openai_provider, n_prompts=4, n_samples=2, human=False)
    httpserver.expect_request(CHAT).respond_with_handler(reply_per_prompt)
    generate_all(study)
    assert Response.objects.count() == 8  # two samples of each prompt, each pair the same text
    assert not Response.objects.filter(review="flagged").exists()


@pytest.mark.django_db
def test_the_flag_is_not_added_twice_nor_put_back_on_an_approved_reply(openai_provider, httpserver):
    study = make_study(provider=openai_provider, n_prompts=3, human=False)
    httpserver.expect_request(CHAT).respond_with_json(openai_body("I'm sorry to hear that."))
    generate_all(study)
    condition = study.conditions.get(name="gpt")
    Response.objects.filter(condition=condition).update(review=Response.Review.APPROVED)
    assert condition_duplicates_flag(condition_id=condition.id) == 0
    assert set(Response.objects.values_list("review", flat=True)) == {"approved"}
    assert all(r.review_flags == [DUPLICATE_FLAG] for r in Response.objects.all())
