"""Fixtures for generation: a loopback provider (pytest-httpserver) speaking OpenAI's or Anthropic's wire format."""

import json
import threading

import pytest
from django.db import connection

from generation.models import LLMConditionConfig, Provider
from generation.ratelimit import limit_spec_for, limiter_reset
from studies.models import Condition
from tests.concurrency import race as race_threads
from tests.factories import ConditionFactory, PromptFactory, StudyFactory
from tests.loopback_server import LoopbackServer

TEST_KEY = "sk-test-SECRET-0123456789abcdef"


def openai_body(
    text="I'm so sorry to hear that. That sounds really hard.", *, finish="stop", model="gpt-test-0613"
):
    return {
        "id": "chatcmpl-abc123",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 14, "total_tokens": 134},
    }


def anthropic_body(
    text="That sounds exhausting; I'm here for you.", *, stop="end_turn", model="claude-test-20250101"
):
    return {
        "id": "msg_01abc",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 110, "output_tokens": 12},
    }


def json_response(body, status=200, headers=None):
    from werkzeug import Response as WResponse

    return WResponse(json.dumps(body), status=status, headers=headers or {}, content_type="application/json")


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("TEST_GEN_API_KEY", TEST_KEY)
    return TEST_KEY


def make_provider(httpserver, *, kind="openai", name=None, **overrides):
    base = httpserver.url_for("/v1") if kind == "openai" else httpserver.url_for("").rstrip("/")
    options = dict(
        name=name or f"loop-{kind}",
        kind=kind,
        base_url=base,
        api_key_env="TEST_GEN_API_KEY",
        max_concurrency=8,
        requests_per_minute=60_000,
        tokens_per_minute=10_000_000,
        price_input_per_million="2.5",
        price_output_per_million="10",
        timeout_seconds=2.0,
        max_attempts=4,
    )
    options.update(overrides)
    provider = Provider.objects.create(**options)
    limiter_reset(spec=limit_spec_for(provider))
    return provider


@pytest.fixture
def openai_provider(httpserver, api_key):
    return make_provider(httpserver, kind="openai")


@pytest.fixture
def anthropic_provider(httpserver, api_key):
    return make_provider(httpserver, kind="anthropic")


def make_study(
    *, provider, n_prompts=3, conditions=("gpt",), n_samples=1, max_tokens=120, human=True, **config
):
    study = StudyFactory(slug="gen-study")
    prompts = [
        PromptFactory(
            study=study,
            situation=f"My dog passed away last week ({i}).",
            speaker_utterance=f"I miss him {i}.",
        )
        for i in range(n_prompts)
    ]
    if human:
        human_condition = ConditionFactory(
            study=study, name="human", kind=Condition.Kind.HUMAN, is_baseline=True
        )
        from studies.models import Response

        for prompt in prompts:
            Response.objects.create(
                prompt=prompt, condition=human_condition, text="Oh no, I am so sorry about that."
            )
    for name in conditions:
        condition = ConditionFactory(study=study, name=name, kind=Condition.Kind.LLM)
        LLMConditionConfig.objects.create(
            condition=condition,
            provider=provider,
            model="gpt-test",
            temperature=0.7,
            max_tokens=max_tokens,
            seed=11,
            n_samples=n_samples,
            **config,
        )
    return study


@pytest.fixture
def fast_retries(settings):
    """Tiny backoff so retry tests run in milliseconds (Retry-After still wins when a provider sends it)."""
    settings.GENERATION_BACKOFF_BASE = 0.01
    settings.GENERATION_BACKOFF_CAP = 0.05
    return settings


@pytest.fixture
def threaded_server():
    """A loopback provider that answers requests concurrently (pytest-httpserver's default is one at a time)."""
    server = LoopbackServer(host="127.0.0.1", threaded=True)
    server.start()
    yield server
    server.clear()
    if server.is_running():
        server.stop()


def race(run, n: int) -> list[str]:
    """Call `run()` from n threads released at once (each on its own database connection); their outcomes'
    statuses, in finishing order."""
    results, errors = race_threads(lambda i: run().status, n)
    assert not errors, errors
    return list(results.values())


def race_mid_call(run, n: int, call_entered: threading.Event) -> list[str]:
    """Start one worker; once its provider call is in flight (the loopback handler sets `call_entered`), release
    n - 1 more at once: with an expired lease they take the work over mid-call. Their outcomes' statuses."""
    first = []

    def worker():
        try:
            first.append(run().status)
        finally:
            connection.close()

    thread = threading.Thread(target=worker)
    thread.start()
    assert call_entered.wait(10), "the first worker never called the provider"
    outcomes = race(run, n - 1)
    thread.join()
    return first + outcomes


def overlap_gate(calls: int = 2, timeout: float = 5.0):
    """For a loopback handler of a race test: the returned callable returns once `calls` provider calls have come
    in (or after `timeout` seconds), so the overlap such a test is about does not depend on how fast this machine
    starts the racing threads."""
    arrived = threading.Condition()
    count = [0]

    def gate() -> None:
        with arrived:
            count[0] += 1
            arrived.notify_all()
            arrived.wait_for(lambda: count[0] >= calls, timeout=timeout)

    return gate


def condition_config_post(client, provider, *, n_prompts=3, **fields):
    """A study with one LLM condition "gpt4" and no configuration yet, and the admin's "add configuration" form
    posted for it with gpt-4o, 200 tokens, one sample and `fields`. Returns (condition, response)."""
    from django.urls import reverse

    study = make_study(provider=provider, conditions=(), n_prompts=n_prompts)
    condition = Condition.objects.create(study=study, name="gpt4", kind=Condition.Kind.LLM)
    form = {
        "condition": condition.id,
        "provider": provider.id,
        "model": "gpt-4o",
        "max_tokens": 200,
        "n_samples": 1,
        **fields,
    }
    return condition, client.post(reverse("admin:generation_llmconditionconfig_add"), form)


@pytest.fixture
def worker_queue(settings, redis_url):
    """A queue of this test's own for generation's messages (`GENERATION_QUEUE`), emptied from the broker after."""
    import uuid

    import redis

    queue = f"generation-test-{uuid.uuid4().hex[:8]}"
    settings.GENERATION_QUEUE = queue
    yield queue
    redis.Redis.from_url(redis_url).delete(queue)
