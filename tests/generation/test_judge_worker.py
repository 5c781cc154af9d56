"""A judge run through a real Celery worker process on Redis: `judge_run --wait` dispatches every rating by task
name, transient errors (a 503 on every third call) are re-queued with their backoff, and each (response, sample) is
stored exactly once."""

import itertools
import threading
from io import StringIO

import pytest
from django.core.management import call_command

from generation.judge_models import JudgeRating

from .conftest import json_response, make_provider, make_study
from .judge_helpers import judge_reply_body, make_judge
from .test_celery_worker import _kill, _start_worker

CHAT = "/v1/chat/completions"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_rates_every_response_once_through_transient_errors(
    threaded_server, api_key, redis_url, settings, worker_queue, requires_postgres, tmp_path
):
    queue = worker_queue
    calls = itertools.count()
    lock = threading.Lock()

    def flaky(request):
        with lock:
            n = next(calls)
        if n % 3 == 2:
            return json_response({"error": {"message": "overloaded"}}, status=503)
        return json_response(judge_reply_body("**Good**"))

    threaded_server.expect_request(CHAT).respond_with_handler(flaky)
    provider = make_provider(threaded_server, max_attempts=6)
    study = make_study(provider=provider, n_prompts=12, conditions=())
    make_judge(study, provider, name="j", n_samples=2)
    log_path = tmp_path / "worker.log"
    worker = _start_worker(queue, redis_url, log_path)
    try:
        out = StringIO()
        call_command("judge_run", study.slug, "j", "--wait", "--no-progress", stdout=out)
    finally:
        _kill(worker)
    assert "24 new ratings, 24 to run (sent to the workers)" in out.getvalue()
    assert "24/24 rated, 0 pending, 0 failed" in out.getvalue(), log_path.read_text()
    rows = JudgeRating.objects.all()
    assert rows.count() == 24 and set(rows.values_list("status", "value")) == {("done", 3)}
    assert len(threaded_server.log) >= 24 + 24 // 3  # the 503s were retried
    assert any(r.attempts > 1 for r in rows)
