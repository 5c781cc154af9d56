"""Judge spend counts every call the provider answered, including replies refused after they came: a malformed
verdict (no choices, but `usage` in the body), an empty text, a reply naming no label. Against a loopback provider
speaking OpenAI's wire format."""

from decimal import Decimal

import pytest

from generation.judge_models import JudgeRating
from generation.models import GenerationItem
from generation.selectors import judge_progress
from generation.services import judging
from generation.services.dispatch import generation_start
from generation.services.running import generation_item_run, run_until_settled

from .conftest import make_provider, make_study
from .judge_helpers import judge_reply_body, judged_study, make_judge

CHAT = "/v1/chat/completions"
USAGE = {"prompt_tokens": 300, "completion_tokens": 7, "total_tokens": 307}


def _run_all(judge):
    started = judging.judge_start(judge=judge, dispatch=False)
    return [
        run_until_settled(lambda i=i: judging.judge_rating_run(rating_id=i)).status
        for i in started.rating_ids
    ]


@pytest.mark.django_db
def test_24_failed_calls_whose_replies_reported_usage_are_all_in_the_judges_spend(
    httpserver, api_key, fast_retries
):
    provider = make_provider(httpserver, max_attempts=3)  # 8 ratings × 3 attempts = 24 failed calls
    study = make_study(provider=provider, n_prompts=4, conditions=())  # 4 human responses
    judge = make_judge(study, provider, n_samples=2)
    # A malformed verdict: no choices at all, but the body says what the call used.
    httpserver.expect_request(CHAT).respond_with_json({"id": "x", "model": "judge-test", "usage": USAGE})

    assert _run_all(judge) == ["failed"] * 8
    assert len(httpserver.log) == 24
    progress = judge_progress(judge=judge)
    assert (progress["failed"], progress["tokens_in"], progress["tokens_out"]) == (8, 24 * 300, 24 * 7)
    # 2.5 and 10 USD per million tokens in and out (the loopback provider's prices).
    assert progress["spend"] == Decimal(24) * (Decimal(300) * Decimal("2.5") + Decimal(7) * 10) / 1_000_000
    assert set(JudgeRating.objects.values_list("error_kind", flat=True)) == {"malformed"}


@pytest.mark.django_db
def test_empty_and_unparseable_replies_count_their_tokens_and_a_stored_verdict_counts_its_own(
    httpserver, api_key, fast_retries
):
    study, judge = judged_study(httpserver, n_prompts=1, max_attempts=4)
    httpserver.expect_ordered_request(CHAT).respond_with_json(judge_reply_body("", prompt_tokens=100))
    httpserver.expect_ordered_request(CHAT).respond_with_json(judge_reply_body("Hmm.", prompt_tokens=200))
    httpserver.expect_ordered_request(CHAT).respond_with_json(judge_reply_body("Good", prompt_tokens=300))

    assert _run_all(judge) == ["done"]
    rating = JudgeRating.objects.get()
    assert (rating.value, rating.input_tokens) == (3, 300)  # the stored verdict's own call
    assert (rating.spent_input_tokens, rating.spent_output_tokens) == (600, 6)  # every call's
    assert judge_progress(judge=judge)["tokens_in"] == 600


@pytest.mark.django_db
def test_a_generation_call_refused_after_it_answered_is_in_the_items_spend(httpserver, api_key, fast_retries):
    provider = make_provider(httpserver, max_attempts=2)
    study = make_study(provider=provider, n_prompts=1, human=False)
    httpserver.expect_request(CHAT).respond_with_json({"choices": [], "usage": USAGE})
    generation_start(study=study, conditions=list(study.conditions.all()), dispatch=False)
    [item] = GenerationItem.objects.all()
    assert run_until_settled(lambda: generation_item_run(item_id=item.id)).status == "failed"
    item.refresh_from_db()
    assert item.cost == 2 * (Decimal(300) * Decimal("2.5") + Decimal(7) * 10) / 1_000_000
