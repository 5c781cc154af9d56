"""Races that really race: duplicate deliveries of one item, an expired lease taken over mid-call, and the
provider limits holding across several processes sharing Redis."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

from generation.models import GenerationAttempt, GenerationItem
from generation.ratelimit import _shape
from generation.services.dispatch import generation_start
from generation.services.running import generation_item_run
from studies.models import Response

from .conftest import json_response, make_provider, make_study, openai_body, overlap_gate, race, race_mid_call

CHAT = "/v1/chat/completions"
ROOT = Path(__file__).resolve().parents[2]


def _race(item_id, n):
    return race(lambda: generation_item_run(item_id=item_id), n)


@pytest.mark.django_db(transaction=True)
def test_an_item_delivered_eight_times_at_once_is_called_and_stored_once(
    threaded_server, api_key, requires_postgres
):
    provider = make_provider(threaded_server)
    study = make_study(provider=provider, n_prompts=1, human=False)
    threaded_server.expect_request(CHAT).respond_with_json(openai_body())
    result = generation_start(study=study, conditions=list(study.conditions.all()), dispatch=False)

    outcomes = _race(result.item_ids[0], 8)

    assert sorted(outcomes) == ["done"] + ["skipped"] * 7
    assert len(threaded_server.log) == 1
    assert Response.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_workers_taking_over_expired_leases_mid_call_still_store_one_response(
    threaded_server, api_key, settings, requires_postgres
):
    # Every claim expires at once: each racing worker takes the item over from the previous one and calls the
    # provider; only the holder of the last claim may store, the rest are recorded as discarded.
    settings.GENERATION_LEASE_SECONDS = 0
    provider = make_provider(threaded_server, timeout_seconds=10)  # a slow, loaded machine is not a hang
    study = make_study(provider=provider, n_prompts=1, human=False)

    gate = overlap_gate()
    call_entered = threading.Event()

    def slow(request):
        call_entered.set()
        gate()
        time.sleep(0.05)
        return json_response(openai_body())

    threaded_server.expect_request(CHAT).respond_with_handler(slow)
    result = generation_start(study=study, conditions=list(study.conditions.all()), dispatch=False)

    outcomes = race_mid_call(lambda: generation_item_run(item_id=result.item_ids[0]), 5, call_entered)

    calls = len(threaded_server.log)
    assert calls >= 2  # several workers really were inside a provider call at the same time
    assert outcomes.count("done") == 1
    assert outcomes.count("discarded") == calls - 1
    assert Response.objects.count() == 1
    assert GenerationAttempt.objects.filter(outcome="discarded").count() == calls - 1
    item = GenerationItem.objects.get()
    assert item.status == "done" and item.response_id == Response.objects.get().id


LIMIT_SCRIPT = r"""
import os, sys, threading, time
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()
from generation.models import Provider
from generation.providers import adapter_for, provider_complete, TransientProviderError

provider = Provider(pk=int(sys.argv[1]), name="shared", kind="openai", base_url=sys.argv[2],
                    api_key_env="TEST_GEN_API_KEY", max_concurrency=50, requests_per_minute=int(sys.argv[3]),
                    tokens_per_minute=10_000_000, timeout_seconds=5, price_input_per_million=0,
                    price_output_per_million=0)
adapter_for(provider).client(provider, os.environ["TEST_GEN_API_KEY"])  # build the SDK client before the clock starts
print("ready", flush=True)
sys.stdin.readline()  # the test says go once every process is ready
stop_at = time.time() + float(sys.argv[4])

def loop():
    while time.time() < stop_at:
        try:
            provider_complete(provider=provider, model="m", messages=[{"role": "user", "content": "hi"}],
                              params={"max_tokens": 5}, max_wait=1.0)
        except TransientProviderError:
            pass

threads = [threading.Thread(target=loop) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
"""


@pytest.mark.django_db
def test_requests_per_minute_hold_across_processes_sharing_redis(threaded_server, api_key, redis_url):
    rpm = 600  # 10 per second, evenly spaced
    stamps = []
    lock = threading.Lock()

    def handler(request):
        with lock:
            stamps.append(time.time())
        return json_response(openai_body())

    threaded_server.expect_request(CHAT).respond_with_handler(handler)
    from generation.models import Provider
    from generation.ratelimit import limit_spec_for, limiter_reset

    pk = 900_000 + os.getpid() % 10_000
    limiter_reset(
        spec=limit_spec_for(Provider(pk=pk, requests_per_minute=rpm, tokens_per_minute=1, max_concurrency=1))
    )
    duration = 4.0
    env = dict(os.environ, DATABASE_URL=_db_url(), REDIS_URL=redis_url)
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                LIMIT_SCRIPT,
                str(pk),
                threaded_server.url_for("/v1"),
                str(rpm),
                str(duration),
            ],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    for process in processes:
        assert process.stdout.readline().strip() == "ready"
    start_at = time.time()
    for process in processes:
        process.stdin.write("go\n")
        process.stdin.flush()
    for process in processes:
        assert process.wait(timeout=60) == 0

    stamps.sort()
    assert stamps and stamps[0] >= start_at - 0.05
    # The limiter admits at most burst + T * steady requests in any T seconds, shaped so that a 60-second window
    # never exceeds rpm (generation.ratelimit._shape). A request reaches the server a little after it is admitted
    # (building it, the GIL, a busy machine), so a server-side window of T seconds holds what was admitted in
    # T + delay: we allow 1.5 s of delay (a loaded machine). 12 threads in 3 processes would send hundreds per
    # second without the limiter.
    interval, burst = _shape(rpm)
    gaps = [round(b - a, 3) for a, b in zip(stamps, stamps[1:], strict=False)]
    for window in (1.0, 2.0, 3.0):
        busiest = max(sum(1 for s in stamps if t <= s < t + window) for t in stamps)
        assert busiest <= burst + (window + 1.5) / interval + 1, (window, busiest, gaps)
    # Threads stop asking at the end of the run but may be admitted up to max_wait (1 s) later.
    assert len(stamps) <= burst + (duration + 1) / interval + 1, gaps
    # And the limit is used, not starved (half of it at least, however loaded the machine).
    assert len(stamps) >= 0.5 * duration / interval, gaps
    # Extrapolated to a minute, the schedule stays within the limit.
    assert burst + 60 / interval <= rpm


def _db_url():
    settings_dict = connection.settings_dict
    return f"postgres://{settings_dict['USER']}@{settings_dict['HOST']}:{settings_dict['PORT']}/{settings_dict['NAME']}"
