"""The LLM judge through generation's machinery, against a loopback provider speaking OpenAI's wire format: the
rubric, reading replies, exactly-once storage under races, provenance and spend, and the provider's errors (429
with Retry-After, 5xx, a hang, malformed bodies, unparseable replies)."""

import json
import threading
import time
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from werkzeug import Response as WResponse

from generation.judge_models import JudgeRating
from generation.providers import TransientProviderError
from generation.selectors import judge_progress, judge_ratings_frame
from generation.services import judging
from generation.services.running import run_until_settled
from studies.models import default_scale

from .conftest import json_response, make_provider, make_study, overlap_gate, race, race_mid_call
from .judge_helpers import judge_reply_body, judged_study, make_judge

CHAT = "/v1/chat/completions"
SCALE = default_scale()


def _run_all(judge):
    started = judging.judge_start(judge=judge, dispatch=False)
    return [
        run_until_settled(lambda i=i: judging.judge_rating_run(rating_id=i)).status
        for i in started.rating_ids
    ]


# --- the rubric and the reply ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply, value",
    [("Good.", 3), ("**Okay**", 2), ("  bad\n", 1), ("Rating: GOOD", 3), ("OKAY!!!", 2), ("good. Good", 3)],
)
def test_a_reply_naming_one_label_is_its_value_whatever_the_case_and_punctuation(reply, value):
    assert judging.reply_value(reply, scale=SCALE) == value


@pytest.mark.parametrize("reply", ["Good or bad?", "Excellent", "", "3", "Okay, maybe good"])
def test_a_reply_naming_no_label_or_several_is_unparseable(reply):
    with pytest.raises(TransientProviderError) as caught:
        judging.reply_value(reply, scale=SCALE)
    assert caught.value.kind == "unparseable" and "Good, Okay, Bad" in str(caught.value)


def test_a_label_inside_a_longer_label_counts_once():
    scale = [{"value": 1, "label": "Good"}, {"value": 2, "label": "Very good"}]
    assert judging.reply_value("Very good!", scale=scale) == 2
    assert judging.reply_value("good", scale=scale) == 1


@pytest.mark.django_db
def test_an_unknown_placeholder_in_the_rubric_is_a_clear_error_of_clean(httpserver, api_key):
    provider = make_provider(httpserver)
    study = make_study(provider=provider, n_prompts=1)
    with pytest.raises(ValidationError) as caught:
        make_judge(study, provider, rubric="Rate {response} given {feeling} and {mood}.")
    assert caught.value.message_dict["rubric"] == [
        "Unknown placeholder(s) in the rubric: {feeling}, {mood}; it would reach the model unfilled. Allowed: "
        "{situation}, {speaker_utterance}, {emotion}, {response}, {scale} (write {{ and }} for literal braces)."
    ]
    with pytest.raises(ValidationError, match="not well formed"):
        make_judge(study, provider, rubric="Rate {response")


@pytest.mark.django_db
def test_the_rubric_is_rendered_with_the_response_and_the_scale(httpserver, api_key):
    provider = make_provider(httpserver)
    study = make_study(provider=provider, n_prompts=1)
    judge = make_judge(study, provider, rubric="{emotion}|{situation}|{speaker_utterance}|{response}|{scale}")
    response = study.prompts.get().responses.get()
    system, messages = judging.judge_render(judge=judge, response=response)
    prompt = response.prompt
    assert messages == [
        {
            "role": "user",
            "content": f"{prompt.emotion.name}|{prompt.situation}|{prompt.speaker_utterance}|{response.text}"
            "|Good, Okay, Bad",
        }
    ]


# --- running -----------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_run_rates_every_response_once_with_provenance_tokens_and_cost(httpserver, api_key):
    provider = make_provider(httpserver)
    study = make_study(provider=provider, n_prompts=3, conditions=())  # three human responses
    judge = make_judge(study, provider, n_samples=2, temperature=0.5)
    httpserver.expect_request(CHAT).respond_with_json(judge_reply_body("**Okay**"))

    assert _run_all(judge) == ["done"] * 6
    assert judging.judge_start(judge=judge, dispatch=False).rating_ids == []  # idempotent: nothing left
    assert len(httpserver.log) == 6
    rating = JudgeRating.objects.order_by("id").last()
    assert (rating.status, rating.value, rating.reply_text, rating.attempts) == ("done", 2, "**Okay**", 1)
    sent = json.loads(httpserver.log[-1][0].get_data())
    assert rating.request == sent and sent["model"] == "judge-test" and sent["max_tokens"] == 8
    assert {json.loads(r.get_data())["seed"] for r, _ in httpserver.log} == {5, 6}  # seed + sample index
    assert rating.model_returned == "judge-test-0613" and rating.provider_response_id == "chatcmpl-judge"
    assert (rating.input_tokens, rating.output_tokens) == (300, 2)
    one_call = Decimal(300) * Decimal("2.5") / 10**6 + Decimal(2) * Decimal(10) / 10**6
    assert rating.cost == one_call
    progress = judge_progress(judge=judge)
    assert (progress["done"], progress["pending"], progress["failed"], progress["slots"]) == (6, 0, 0, 6)
    assert progress["spend"] == 6 * one_call
    frame = judge_ratings_frame(judge=judge)
    assert list(frame.columns) == ["response_id", "sample_index", "value", "condition", "emotion", "words"]
    assert len(frame) == 6 and set(frame["value"]) == {2}


@pytest.mark.django_db
def test_only_the_chosen_conditions_are_rated(httpserver, api_key):
    study, judge = judged_study(httpserver, n_prompts=2)
    with pytest.raises(judging.JudgeSetupError, match="no condition named 'gpt4'.*its conditions: human"):
        judging.judge_conditions(judge=judge, names=["gpt4"])
    human = judging.judge_conditions(judge=judge, names=["human"])
    assert judging.judge_start(judge=judge, conditions=human, dispatch=False).created == 2


@pytest.mark.django_db
def test_an_unparseable_reply_is_retried_then_fails_with_the_reply_quoted_and_its_cost_counted(
    httpserver, api_key, fast_retries
):
    study, judge = judged_study(httpserver, n_prompts=1, max_attempts=3)
    httpserver.expect_request(CHAT).respond_with_json(judge_reply_body("It is fine, I think."))

    assert _run_all(judge) == ["failed"]
    rating = JudgeRating.objects.get()
    assert (rating.status, rating.error_kind, rating.attempts, rating.value) == (
        "failed",
        "unparseable",
        3,
        None,
    )
    assert "names none of the labels" in rating.last_error and "gave up after 3 attempts" in rating.last_error
    assert rating.reply_text == "It is fine, I think."
    assert len(httpserver.log) == 3 and rating.cost > 0
    assert judge_progress(judge=judge)["error_kinds"] == [("unparseable", 1)]


@pytest.mark.django_db
def test_a_429_waits_at_least_its_retry_after_then_succeeds(httpserver, api_key, fast_retries):
    provider = make_provider(httpserver)
    study = make_study(provider=provider, n_prompts=1, conditions=())
    judge = make_judge(study, provider)
    httpserver.expect_ordered_request(CHAT).respond_with_response(
        json_response(
            {"error": {"message": "Rate limit reached"}}, status=429, headers={"retry-after": "1.5"}
        )
    )
    httpserver.expect_ordered_request(CHAT).respond_with_json(judge_reply_body("Good"))
    [rating_id] = judging.judge_start(judge=judge, dispatch=False).rating_ids

    first = judging.judge_rating_run(rating_id=rating_id)
    assert first.status == "retry" and first.countdown >= 1.5  # the provider's Retry-After is the floor
    rating = JudgeRating.objects.get()
    assert (rating.status, rating.error_kind) == ("pending", "rate_limited") and rating.next_attempt_at
    assert judging.judge_rating_run(rating_id=rating_id).status == "done"
    assert JudgeRating.objects.get().value == 3


@pytest.mark.django_db
def test_server_errors_and_malformed_bodies_are_retried_and_a_400_fails_at_once(
    httpserver, api_key, fast_retries
):
    study, judge = judged_study(httpserver, n_prompts=2)
    httpserver.expect_ordered_request(CHAT).respond_with_response(WResponse("upstream down", status=503))
    httpserver.expect_ordered_request(CHAT).respond_with_data(
        "<html>not json</html>", content_type="text/html"
    )
    httpserver.expect_ordered_request(CHAT).respond_with_json({"choices": []})
    httpserver.expect_ordered_request(CHAT).respond_with_json(judge_reply_body("Bad"))
    httpserver.expect_ordered_request(CHAT).respond_with_json(
        {"error": {"message": "Invalid 'max_tokens'", "type": "invalid_request_error"}}, status=400
    )
    assert _run_all(judge) == ["done", "failed"]
    first, second = JudgeRating.objects.order_by("id")
    assert (first.value, first.attempts) == (1, 4)
    assert (second.status, second.error_kind, second.attempts) == ("failed", "bad_request", 1)
    assert "Invalid 'max_tokens'" in second.last_error


@pytest.mark.django_db
def test_a_provider_that_hangs_times_out_and_fails_after_its_attempts(httpserver, api_key, fast_retries):
    study, judge = judged_study(httpserver, n_prompts=1, timeout_seconds=0.3, max_attempts=2)

    def hang(request):
        time.sleep(1.0)
        return json_response(judge_reply_body("Good"))

    httpserver.expect_request(CHAT).respond_with_handler(hang)
    assert _run_all(judge) == ["failed"]
    rating = JudgeRating.objects.get()
    assert (rating.error_kind, rating.attempts, rating.value) == ("timeout", 2, None)
    assert "no reply within 0.3s" in rating.last_error


@pytest.mark.django_db
def test_a_missing_key_stops_the_run_before_anything_is_written(httpserver, api_key, monkeypatch):
    study, judge = judged_study(httpserver, n_prompts=1)
    monkeypatch.delenv("TEST_GEN_API_KEY")
    with pytest.raises(judging.JudgeSetupError, match="TEST_GEN_API_KEY"):
        judging.judge_start(judge=judge, dispatch=False)
    assert not JudgeRating.objects.exists()


# --- races -------------------------------------------------------------------------------------------------------


def _race(rating_id, n):
    return race(lambda: judging.judge_rating_run(rating_id=rating_id), n)


@pytest.mark.django_db(transaction=True)
def test_a_rating_delivered_eight_times_at_once_is_called_and_stored_once(
    threaded_server, api_key, requires_postgres
):
    provider = make_provider(threaded_server)
    study = make_study(provider=provider, n_prompts=1, conditions=())
    judge = make_judge(study, provider)
    threaded_server.expect_request(CHAT).respond_with_json(judge_reply_body("Good"))
    [rating_id] = judging.judge_start(judge=judge, dispatch=False).rating_ids

    assert sorted(_race(rating_id, 8)) == ["done"] + ["skipped"] * 7
    assert len(threaded_server.log) == 1
    assert JudgeRating.objects.get().value == 3


@pytest.mark.django_db(transaction=True)
def test_workers_taking_over_expired_leases_mid_call_store_one_value_and_pay_for_every_call(
    threaded_server, api_key, settings, requires_postgres
):
    # Every claim expires at once: each racing worker takes the rating over and calls the provider; only the
    # holder of the last claim stores its value, each of the others is discarded, and every call is paid for.
    settings.GENERATION_LEASE_SECONDS = 0
    provider = make_provider(threaded_server, timeout_seconds=10)  # a slow, loaded machine is not a hang
    study = make_study(provider=provider, n_prompts=1, conditions=())
    judge = make_judge(study, provider)
    lock = threading.Lock()
    replies = iter(["Good", "Okay", "Bad", "Good", "Okay"])
    gate = overlap_gate()
    call_entered = threading.Event()

    def slow(request):
        with lock:
            text = next(replies)
        call_entered.set()
        gate()
        time.sleep(0.05)
        return json_response(judge_reply_body(text))

    threaded_server.expect_request(CHAT).respond_with_handler(slow)
    [rating_id] = judging.judge_start(judge=judge, dispatch=False).rating_ids

    outcomes = race_mid_call(lambda: judging.judge_rating_run(rating_id=rating_id), 5, call_entered)

    calls = len(threaded_server.log)
    assert calls >= 2  # several workers were inside a provider call at once
    assert outcomes.count("done") == 1 and outcomes.count("discarded") == calls - 1
    rating = JudgeRating.objects.get()
    assert rating.status == "done" and rating.value in (1, 2, 3)
    assert rating.reply_text.casefold() == {1: "bad", 2: "okay", 3: "good"}[rating.value]
    one_call = Decimal(300) * Decimal("2.5") / 10**6 + Decimal(2) * Decimal(10) / 10**6
    assert rating.cost == calls * one_call
