"""A real Celery worker process on Redis, SIGKILLed mid-run and started again: every (prompt, condition) ends with
exactly one response.

The worker is `celery -A config worker` in a subprocess whose DATABASE_URL points at this test run's database
(transactional test, so the worker sees committed rows) and whose broker is this run's Redis database, on a queue
of its own."""

import os
import signal
import subprocess
import threading
import time
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import Count

from bench.lib.celery_worker import celery_worker_command
from generation.models import GenerationItem
from studies.models import Response

from .conftest import json_response, make_provider, make_study, openai_body

ROOT = Path(__file__).resolve().parents[2]
CHAT = "/v1/chat/completions"


def _db_url():
    s = connection.settings_dict
    return f"postgres://{s['USER']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"


WORKER_APP_NAME = "generation-test-worker"


def _start_worker(queue, redis_url, log_path):
    env = dict(
        os.environ,
        DATABASE_URL=f"{_db_url()}?application_name={WORKER_APP_NAME}",
        REDIS_URL=redis_url,
        DJANGO_ENV="test",
        GENERATION_QUEUE=queue,
        GENERATION_LEASE_SECONDS="3",
        GENERATION_BACKOFF_BASE_MS="50",
        LOG_LEVEL="WARNING",
    )
    log = open(log_path, "ab")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(
        celery_worker_command(queue=queue, name=f"gen-{uuid.uuid4().hex[:6]}@%h", concurrency=4),
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, so SIGKILL reaches every process it started
    )
    process.log = log
    return process


def _kill(process):
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    process.log.close()
    # A SIGKILLed client's server sessions can outlive it for a moment; end them so the test database can be
    # flushed and dropped.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s AND datname = %s",
            [WORKER_APP_NAME, connection.settings_dict["NAME"]],
        )


def _wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_run_and_restarted_leaves_exactly_one_response_per_slot(
    threaded_server, api_key, redis_url, settings, worker_queue, requires_postgres, tmp_path
):
    queue = worker_queue
    settings.GENERATION_LEASE_SECONDS = 3

    def slow(request):
        time.sleep(0.15)
        return json_response(openai_body())

    threaded_server.expect_request(CHAT).respond_with_handler(slow)
    provider = make_provider(threaded_server)
    study = make_study(provider=provider, n_prompts=30, conditions=("gpt4", "llama"), human=False)
    slots = 60
    log_path = tmp_path / "worker.log"

    first = _start_worker(queue, redis_url, log_path)
    try:
        call_command("generate_responses", study.slug, "--no-wait", stdout=StringIO())
        _wait_for(
            lambda: Response.objects.count() >= 10, 90, f"the first worker to store responses ({log_path})"
        )
        _kill(first)
        at_kill = Response.objects.count()
        in_flight = GenerationItem.objects.filter(status="running").count()
        assert at_kill < slots, "the worker finished before it could be killed"

        second = _start_worker(queue, redis_url, log_path)
        try:
            # Resume: re-dispatches what is pending and, once their lease expires, the items the dead worker held.
            done = threading.Event()
            errors = []

            def resume():
                try:
                    call_command("generate_responses", study.slug, "--no-progress", stdout=StringIO())
                except Exception as exc:  # reported by the assertion below
                    errors.append(exc)
                finally:
                    connection.close()
                    done.set()

            threading.Thread(target=resume, daemon=True).start()
            assert done.wait(120), f"resuming did not finish ({log_path})"
            assert not errors, errors
        finally:
            _kill(second)
    finally:
        _kill(first)

    per_slot = Response.objects.values("prompt", "condition").annotate(n=Count("id"))
    assert len(per_slot) == slots
    assert {row["n"] for row in per_slot} == {1}
    assert set(GenerationItem.objects.values_list("status", flat=True)) == {"done"}
    # The kill really interrupted work: calls were in flight or queued when it happened.
    assert at_kill + in_flight <= slots
    assert len(threaded_server.log) >= slots
