"""A generation message lost before its item was started (a worker killed with the message taken off the queue,
which the broker returns only after its visibility timeout): the sweep sends the item again once its message is
older than GENERATION_REDISPATCH_SECONDS, a real Celery worker generates it, and the lost message arriving late
changes nothing: exactly one provider call and one response."""

from datetime import timedelta

import pytest
from django.db.models import Count
from django.utils import timezone

from generation.models import GenerationAttempt, GenerationItem
from generation.services.dispatch import generation_dispatch, generation_start, generation_sweep
from studies.models import Response

from .conftest import json_response, make_provider, make_study, openai_body
from .test_celery_worker import CHAT, _kill, _start_worker, _wait_for


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_item_whose_message_was_lost_is_generated_exactly_once(
    threaded_server, api_key, redis_url, settings, worker_queue, requires_postgres, tmp_path
):
    queue = worker_queue
    threaded_server.expect_request(CHAT).respond_with_handler(lambda request: json_response(openai_body()))
    study = make_study(provider=make_provider(threaded_server), n_prompts=5, human=False)
    started = generation_start(study=study, conditions=list(study.conditions.all()), dispatch=False)
    lost, last, *sent = started.item_ids
    generation_dispatch(item_ids=sent)  # the lost item's message never reaches a worker that starts it
    worker = _start_worker(queue, redis_url, tmp_path / "worker.log")
    try:
        _wait_for(lambda: Response.objects.count() == len(sent), 60, "the sent items to be generated")
        assert GenerationItem.objects.get(pk=lost).status == "pending"
        assert generation_sweep() == 0  # its message is recent: it may still be waiting its turn

        old = timezone.now() - timedelta(seconds=settings.GENERATION_REDISPATCH_SECONDS + 1)
        GenerationItem.objects.filter(pk=lost).update(updated_at=old)
        assert generation_sweep() == 1
        assert generation_sweep() == 0  # sent again once per bound, not at every sweep
        _wait_for(lambda: Response.objects.count() == len(sent) + 1, 60, "the lost item to be generated")

        generation_dispatch(item_ids=[lost])  # the broker returns the lost message at last
        generation_dispatch(item_ids=[lost])
        generation_dispatch(item_ids=[last])  # queued behind them: once it is done, they have been taken
        _wait_for(lambda: GenerationItem.objects.get(pk=last).status == "done", 60, "the last item")
    finally:
        _kill(worker)

    assert set(GenerationItem.objects.values_list("status", flat=True)) == {"done"}
    per_slot = Response.objects.values("prompt", "condition").annotate(n=Count("id"))
    assert len(per_slot) == len(started.item_ids) and {row["n"] for row in per_slot} == {1}
    assert GenerationAttempt.objects.filter(item_id=lost).count() == 1
    assert len(threaded_server.log) == len(started.item_ids)
