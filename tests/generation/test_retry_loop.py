"""The one retry policy and loop: synchronous items, the Batch API's line errors and (in tests/emotionbench) the
questionnaire's LLM subjects all settle provider errors through services.running."""

import pytest

from generation import batches
from generation.models import GenerationItem
from generation.providers import PermanentProviderError, TransientProviderError
from generation.services.prompts import generation_conditions
from generation.services.running import RunOutcome, backoff_seconds, retry_decision, run_until_settled

from .conftest import make_provider, make_study
from .test_batches import FakeBatchAPI


def test_the_loop_runs_until_the_step_settles_and_waits_the_countdown_between_tries():
    outcomes = iter([RunOutcome("retry", 0.5), RunOutcome("retry", 2.0), RunOutcome("done")])
    waited = []
    result = run_until_settled(lambda: next(outcomes), wait=lambda s: waited.append(s) or True)
    assert result.status == "done" and waited == [0.5, 2.0]


def test_a_wait_that_hands_the_retry_elsewhere_ends_the_loop():
    calls = []

    def step():
        calls.append(1)
        return RunOutcome("retry", 3.0, "busy")

    result = run_until_settled(step, wait=lambda s: False)
    assert (result.status, result.countdown, len(calls)) == ("retry", 3.0, 1)


def test_permanent_errors_fail_at_once_and_transient_ones_back_off_until_max_attempts(settings):
    settings.GENERATION_BACKOFF_BASE, settings.GENERATION_BACKOFF_CAP = 1.0, 5.0
    refused = retry_decision(error=PermanentProviderError("bad_key", "no"), attempt=1, max_attempts=6)
    assert refused.status == "failed" and "bad_key" in refused.message
    slow = TransientProviderError("server_error", "oops")
    delays = [retry_decision(error=slow, attempt=n, max_attempts=6).countdown for n in (1, 2, 3, 4)]
    assert 1.0 <= delays[0] <= 1.25 and 2.0 <= delays[1] <= 2.5 and 4.0 <= delays[2] <= 5.0
    assert 5.0 <= delays[3] <= 6.25  # capped, plus jitter
    spent = retry_decision(error=slow, attempt=6, max_attempts=6)
    assert spent.status == "failed" and "gave up after 6 attempts" in spent.message


def test_retry_after_is_a_floor_even_above_the_cap(settings):
    settings.GENERATION_BACKOFF_BASE, settings.GENERATION_BACKOFF_CAP = 0.01, 0.05
    told = TransientProviderError("rate_limited", "slow down", retry_after=7.0)
    assert 7.0 <= retry_decision(error=told, attempt=1, max_attempts=3).countdown <= 8.75
    assert 0.02 <= backoff_seconds(attempt=1, retry_after=None, base=0.02) <= 0.025  # a caller's own base
    assert 0.05 <= backoff_seconds(attempt=1, retry_after=None, base=0.3) <= 0.0625  # still capped


@pytest.mark.django_db
def test_a_batch_line_error_is_settled_by_the_same_policy(httpserver, api_key):
    """A transient line on an item whose attempts are used up fails it, as a synchronous call would."""
    api = FakeBatchAPI(httpserver)
    provider = make_provider(httpserver, kind="openai", max_attempts=1)
    study = make_study(provider=provider, n_prompts=2)
    [batch] = batches.batch_submit(study=study, conditions=generation_conditions(study=study))
    api.finish("batch_0", lambda line: (503, {"error": {"message": "overloaded"}}))
    collected = batches.batch_poll(batch=batch)
    assert (collected.items_failed, collected.items_returned) == (2, 0)
    for item in GenerationItem.objects.all():
        assert item.status == "failed" and "gave up after 1 attempts" in item.last_error
        assert item.attempt_log.get().outcome == "transient"
