"""The study's spending limits on live calls (generation/budget.py) through respond_now, on real PostgreSQL: a rush
of threads that tries to overrun the budget, a participant's token cap, a reservation given back when the limiter
refuses, and the reservations of a process that died settled at their maximum."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.utils import timezone
from werkzeug import Response as WerkzeugResponse

from generation.budget import (
    BudgetSpent,
    SpendReservation,
    StudyBudget,
    TokenCapReached,
    budget_admits,
    budget_expire_stale,
    call_maximum,
)
from generation.live import respond_now
from generation.live_models import LiveCall
from generation.models import LLMConditionConfig
from generation.providers.base import LimiterWait
from tests.generation.conftest import make_provider, make_study, overlap_gate
from tests.generation.test_respond_now import ASKED, PATH, sse

pytestmark = pytest.mark.django_db(transaction=True)


def _config(server, **provider):
    provider = make_provider(server, **{"max_concurrency": 100, **provider})
    study = make_study(provider=provider, system_prompt="Be kind.")
    return LLMConditionConfig.objects.select_related("provider", "condition").get(condition__study=study)


def test_a_rush_cannot_spend_more_than_the_budget(threaded_server, api_key, requires_postgres):
    """24 participants at once, each reply billed at its full maximum, a budget for 5 calls: the five calls
    that fit are in flight together (the provider holds each until five have arrived), the rest are refused with
    nothing sent, and what is spent is what the stored calls cost, within the cap."""
    config = _config(threaded_server)
    maximum = call_maximum(
        provider=config.provider, system="Be kind.", messages=ASKED, max_tokens=config.max_tokens
    )
    cap = maximum.cost * 5 + maximum.cost / 2
    budget = StudyBudget.objects.create(study=config.condition.study, cap=cap)
    gate = overlap_gate(calls=5, timeout=10)
    billed_in = maximum.tokens - config.max_tokens

    def handler(request):
        gate()
        base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        usage = {"prompt_tokens": billed_in, "completion_tokens": config.max_tokens}
        events = [
            {**base, "choices": [{"index": 0, "delta": {"content": "Hi."}, "finish_reason": "stop"}]},
            {**base, "choices": [], "usage": usage},
        ]
        text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return WerkzeugResponse(text, mimetype="text/event-stream")

    threaded_server.expect_request(PATH, method="POST").respond_with_handler(handler)
    barrier = threading.Barrier(24)
    outcomes: list[str] = []

    def participant(n):
        barrier.wait()
        try:
            "".join(respond_now(config=config, messages=ASKED, context={"participant": n}))
            outcomes.append("answered")
        except BudgetSpent:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=participant, args=(n,)) for n in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == ["answered"] * 5 + ["refused"] * 19
    assert len(threaded_server.log) == 5 and LiveCall.objects.count() == 5  # refused: nothing sent or stored
    budget.refresh_from_db()
    stored = sum(LiveCall.objects.values_list("cost", flat=True))
    assert budget.reserved == 0 and budget.spent == stored == maximum.cost * 5
    assert budget.spent <= cap + maximum.cost
    assert not budget_admits(budget.study_id, need=maximum.cost)


def test_a_participants_token_cap_refuses_the_call_that_would_pass_it(httpserver, api_key):
    config = _config(httpserver)
    maximum = call_maximum(
        provider=config.provider, system="Be kind.", messages=ASKED, max_tokens=config.max_tokens
    )
    StudyBudget.objects.create(study=config.condition.study, participant_token_cap=maximum.tokens + 20)
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse())  # 25 tokens used a call
    "".join(respond_now(config=config, messages=ASKED, context={"participant": 1}))
    with pytest.raises(TokenCapReached):  # 25 used + the next call's maximum > the cap
        "".join(respond_now(config=config, messages=ASKED, context={"participant": 1}))
    "".join(respond_now(config=config, messages=ASKED, context={"participant": 2}))  # another participant
    assert len(httpserver.log) == 2 and LiveCall.objects.count() == 2


def test_a_call_the_limiter_refuses_gives_its_reservation_back(httpserver, api_key):
    config = _config(httpserver, requests_per_minute=1)
    budget = StudyBudget.objects.create(study=config.condition.study, cap=Decimal("1"))
    httpserver.expect_request(PATH, method="POST").respond_with_handler(sse())
    "".join(respond_now(config=config, messages=ASKED, max_wait=0.1))
    with pytest.raises(LimiterWait):
        "".join(respond_now(config=config, messages=ASKED, max_wait=0.1))
    budget.refresh_from_db()
    assert budget.reserved == 0 and budget.spent == LiveCall.objects.get().cost
    assert list(budget.reservations.values_list("cost", flat=True).order_by("pk"))[1] == 0


def test_the_reservations_of_a_dead_process_are_settled_at_their_maximum(httpserver, api_key):
    config = _config(httpserver)
    budget = StudyBudget.objects.create(study=config.condition.study, cap=Decimal("1"))
    from generation.budget import budget_reserve

    maximum = call_maximum(provider=config.provider, system="", messages=ASKED, max_tokens=100)
    old = budget_reserve(study_id=budget.study_id, participant="9", maximum=maximum)
    fresh = budget_reserve(study_id=budget.study_id, participant="9", maximum=maximum)
    SpendReservation.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(hours=1))
    assert budget_expire_stale() == 1 and budget_expire_stale() == 0
    budget.refresh_from_db()
    assert (budget.spent, budget.reserved) == (maximum.cost, maximum.cost)
    assert SpendReservation.objects.get(pk=fresh.pk).state == SpendReservation.State.HELD


def test_configuring_the_limits_keeps_what_was_spent(httpserver, api_key):
    from generation.budget import budget_configure

    config = _config(httpserver)
    study_id = config.condition.study_id
    budget = budget_configure(study_id=study_id, cap=Decimal("2"), participant_token_cap=None)
    StudyBudget.objects.filter(pk=budget.pk).update(spent=Decimal("1.5"))
    budget = budget_configure(study_id=study_id, cap=Decimal("1"), participant_token_cap=500)
    budget.refresh_from_db()
    assert (budget.cap, budget.participant_token_cap, budget.spent) == (Decimal("1"), 500, Decimal("1.5"))
    assert not budget_admits(study_id) and StudyBudget.objects.count() == 1
