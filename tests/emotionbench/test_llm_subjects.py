import json
import random
import re
import time

import pytest
from django.core.management import call_command
from django.test import Client
from werkzeug import Response as WResponse

from generation.models import LLMConditionConfig, Provider
from generation.questionnaire_models import QuestionnaireExchange
from generation.questionnaire_replies import ReplyParseError, reply_parse
from kinds.questionnaire.analysis import emotionbench_analyse
from studies.models import Condition, Instrument, QuestionnaireRun, Situation, Study, StudySituation
from tests.factories import questionnaire_study_create
from tests.generation.conftest import make_provider as loopback_provider

from .conftest import PA, PANAS_ITEMS

LABELS = ["Interested", "Distressed", "Excited"]


def panas_study(slug: str, title: str, **fields) -> Study:
    """A questionnaire study of the PANAS instrument (imported by the test)."""
    instrument = Instrument.objects.get(name="PANAS")
    return questionnaire_study_create(
        slug=slug, title=title, kind=Study.Kind.QUESTIONNAIRE, instrument=instrument, **fields
    )


def make_provider(httpserver) -> Provider:
    return loopback_provider(
        httpserver, name="loop-eb", api_key_env="EB_TEST_API_KEY", timeout_seconds=5.0, max_attempts=3
    )


def panas_llm_study(slug, provider, model, condition, *, runs, seed):
    """A PANAS study with one LLM subject (`condition`) on `provider`'s `model`; `runs`: (default runs, evoked runs
    per situation, how many of the Anger situations)."""
    default_runs, evoked_runs, situations = runs
    study = panas_study(
        slug,
        f"EmotionBench on {model}",
        llm_default_runs=default_runs,
        llm_evoked_runs=evoked_runs,
        seed=seed,
    )
    chosen = list(Situation.objects.filter(emotion="Anger"))[:situations]
    StudySituation.objects.bulk_create([StudySituation(study=study, situation=s) for s in chosen])
    subject = Condition.objects.create(study=study, name=condition, kind=Condition.Kind.LLM)
    LLMConditionConfig.objects.create(condition=subject, provider=provider, model=model, temperature=0.0)
    return study, subject, chosen


def openai_body(text: str) -> dict:
    return {
        "id": "chatcmpl-eb",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "fake-1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 300, "completion_tokens": 60, "total_tokens": 360},
    }


@pytest.mark.parametrize(
    "text",
    [
        "1. 4\n2. 1\n3. 5",
        "1) 4\n2) 1\n3) 5",
        "Interested: 4\nDistressed: 1\nExcited: 5",
        "1. Interested: 4\n2. Distressed - 1\n3. Excited (5)",
        '{"Interested": 4, "distressed": 1, "Excited": 5}',
        'Here you go: {"1": 4, "2": 1, "3": 5}',
        "[4, 1, 5]",
        "4, 1, 5",
        "**1. Interested**: 4\n**2. Distressed**: 1\n**3. Excited**: 5",
    ],
)
def test_replies_in_any_reasonable_layout_are_parsed(text):
    assert reply_parse(text=text, labels=LABELS, scale_min=1, scale_max=5) == [4, 1, 5]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1. 4\n2. 1", "no answer for items [3]"),
        ("1. 4\n2. 1\n3. 5\n1. 2", "item 1 has two answers"),
        ("1. 4\n2. 9\n3. 5", "9 is outside 1..5"),
        ("1. 4 or 5\n2. 1\n3. 5", "more than one number"),
        ("I am an AI and have no feelings.", "found 0 numbers"),
        ("4 1 5 2", "found 4 numbers"),
        ("1. 3.5\n2. 1\n3. 5", "not a whole number"),
    ],
)
def test_ambiguous_or_incomplete_replies_are_rejected_with_the_reason(text, reason):
    with pytest.raises(ReplyParseError, match=re.escape(reason)):
        reply_parse(text=text, labels=LABELS, scale_min=1, scale_max=5)


def _fake_model(rng: random.Random, garbage_every: int):
    """A loopback chat model: calm by default (PA high, NA low), upset after a scenario (PA low, NA high); it
    answers in the order it was shown, in varied layouts, and sometimes with garbage."""
    calls = {"n": 0}
    positive = {PANAS_ITEMS[i - 1] for i in PA}

    def handler(request):
        calls["n"] += 1
        body = json.loads(request.get_data())
        first = next(m["content"] for m in body["messages"] if m["role"] == "user")
        shown = re.findall(r"^(\d+)\. (\w+)$", first, re.MULTILINE)
        evoked = "Imagine you are the protagonist" in first
        if calls["n"] % garbage_every == 0 and body["messages"][-1]["content"] == first:
            text = "As an AI language model, I do not have feelings."
        else:
            lines = []
            for position, item in shown:
                high = (item in positive) != evoked
                value = rng.choice([4, 5, 5]) if high else rng.choice([1, 1, 2])
                lines.append(f"{position}. {item}: {value}" if calls["n"] % 2 else f"{position}. {value}")
            text = "\n".join(lines)
        return WResponse(json.dumps(openai_body(text)), content_type="application/json")

    return handler, calls


@pytest.mark.django_db
def test_the_full_llm_protocol_runs_against_a_loopback_model_and_is_analysed(
    imported_basics, httpserver, api_key, capsys, redis_url, tmp_path, staff_client
):
    provider = make_provider(httpserver)
    study, condition, situations = panas_llm_study(
        "eb-llm", provider, "fake-1", "fake", runs=(8, 4, 3), seed=3
    )
    handler, calls = _fake_model(random.Random(5), garbage_every=7)
    httpserver.expect_request("/v1/chat/completions").respond_with_handler(handler)

    call_command("generate_questionnaire", "eb-llm", "--threads", "1")
    out = capsys.readouterr().out
    runs = QuestionnaireRun.objects.filter(condition=condition)
    assert runs.filter(phase="default").count() == 8
    assert runs.filter(phase="evoked").count() == 12
    assert set(runs.filter(phase="evoked").values_list("situation", flat=True)) == {s.pk for s in situations}
    # Garbage replies were re-asked, and every exchange is kept.
    unparseable = QuestionnaireExchange.objects.filter(condition=condition, outcome="unparseable")
    assert unparseable.exists()
    assert (
        QuestionnaireExchange.objects.filter(condition=condition).count()
        == calls["n"]
        == 20 + unparseable.count()
    )
    reask = unparseable.first()
    follow_up = QuestionnaireExchange.objects.get(
        condition=condition, phase=reask.phase, situation=reask.situation, run_index=reask.run_index,
        attempt=reask.attempt + 1,
    )  # fmt: skip
    assert "I could not read your answer" in follow_up.request["messages"][-1]["content"]
    # Item order is shuffled per query, recorded, and the answers are mapped back to the items.
    orders = {tuple(run.item_order) for run in runs}
    assert len(orders) > 1 and all(sorted(order) == list(range(1, 21)) for order in orders)
    assert "fake: 20/20 runs" in out and "cost" in out

    analysis = emotionbench_analyse(study=study)
    pa = analysis.get(condition="fake", level="overall", group="Overall", category="Positive Affect")
    na = analysis.get(condition="fake", level="emotion", group="Anger", category="Negative Affect")
    assert pa.two_sample.mean_default > 40 and pa.headline.mark == "↓"
    assert na.two_sample.mean_evoked > 40 and na.headline.mark == "↑"

    # The analyze command dispatches the questionnaire kind to the EmotionBench analysis.
    call_command("analyze", "eb-llm", "--out", str(tmp_path))
    table = capsys.readouterr().out
    assert "fake" in table and "Anger" in table and "↓" in table
    assert (tmp_path / "emotionbench_groups.csv").exists() and (tmp_path / "emotionbench_change.png").exists()

    # The analysts' page shows the same table, and serves it as CSV; participants (anonymous) are sent to log in.
    # The study's dashboard link leads there too.
    assert staff_client.get("/analysis/eb-llm/").url == "/analysis/eb-llm/emotionbench/"
    page = staff_client.get("/analysis/eb-llm/emotionbench/")
    assert page.status_code == 200 and "Default and change per emotion" in page.content.decode()
    csv = staff_client.get("/analysis/eb-llm/emotionbench/groups.csv")
    header = csv.content.decode().splitlines()[0].split(",")
    assert csv.status_code == 200 and {"condition", "level", "group", "category", "p_value", "mark"} <= set(
        header
    )
    assert Client().get("/analysis/eb-llm/emotionbench/").status_code == 302

    # Idempotent: a second run asks nothing.
    before = calls["n"]
    call_command("generate_questionnaire", "eb-llm", "--threads", "1")
    assert calls["n"] == before and runs.count() == 20


def _llm_study(write_json, httpserver, *, slug, default_runs, evoked_runs, models, situations=2, seed=2):
    """A questionnaire study on freshly imported PANAS and situations, with LLM conditions named `models`
    answered by the loopback fake model (every 5th first ask is garbage). Returns (study, calls)."""
    from .conftest import panas_definition, situations_definition

    call_command("import_instruments", write_json("q.json", [panas_definition()]))
    call_command("import_situations", write_json("s.json", situations_definition()))
    provider = make_provider(httpserver)
    study = panas_study(slug, slug, llm_default_runs=default_runs, llm_evoked_runs=evoked_runs)
    StudySituation.objects.bulk_create(
        [StudySituation(study=study, situation=s) for s in Situation.objects.all()[:situations]]
    )
    for name in models:
        condition = Condition.objects.create(study=study, name=name, kind=Condition.Kind.LLM)
        LLMConditionConfig.objects.create(condition=condition, provider=provider, model=name, temperature=0.0)
    handler, calls = _fake_model(random.Random(seed), garbage_every=5)
    httpserver.expect_request("/v1/chat/completions").respond_with_handler(handler)
    return study, calls


@pytest.mark.django_db(transaction=True)
def test_concurrent_workers_store_every_slot_once(
    write_json, httpserver, api_key, redis_url, requires_postgres
):
    study, _calls = _llm_study(
        write_json, httpserver, slug="eb-threads", default_runs=6, evoked_runs=3, models=["fake-a", "fake-b"]
    )
    call_command("generate_questionnaire", "eb-threads", "--threads", "6")
    runs = QuestionnaireRun.objects.filter(study=study)
    assert runs.count() == 2 * (6 + 2 * 3)
    assert runs.values("condition", "subject_key", "phase", "run_index").distinct().count() == runs.count()
    assert all(run.answers.count() == 20 for run in runs)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_llm_subjects_run_on_a_real_celery_worker_and_duplicated_messages_store_each_slot_once(
    write_json, httpserver, api_key, redis_url, requires_postgres, tmp_path, settings
):
    import uuid

    from generation.questionnaire import questionnaire_dispatch, questionnaire_missing
    from tests.generation.test_celery_worker import _kill, _start_worker, _wait_for

    study, calls = _llm_study(
        write_json, httpserver, slug="eb-worker", default_runs=4, evoked_runs=2, models=["fake-w"], seed=4
    )
    condition = study.conditions.get()

    queue = f"eb-{uuid.uuid4().hex[:8]}"
    settings.GENERATION_QUEUE = queue
    # Sent twice before any worker runs: every slot has two messages waiting (a redelivery, a double click).
    assert questionnaire_dispatch(study=study) == 4 + 2 * 2
    assert questionnaire_dispatch(study=study) == 8
    assert QuestionnaireRun.objects.count() == 0  # nothing runs in this process

    worker = _start_worker(queue, redis_url, tmp_path / "worker.log")
    try:
        runs = QuestionnaireRun.objects.filter(study=study)
        _wait_for(lambda: runs.count() == 8 and calls["n"] >= 8, 90, "8 runs from the worker")
        time.sleep(1.0)  # let the duplicate messages finish too
    finally:
        _kill(worker)
    assert runs.count() == 8
    assert runs.values("subject_key", "phase", "run_index").distinct().count() == 8
    assert all(run.answers.count() == 20 for run in runs)
    assert questionnaire_missing(study=study) == []
    assert QuestionnaireExchange.objects.filter(condition=condition, outcome="parsed").count() >= 8


@pytest.mark.django_db
def test_the_admin_shows_llm_subject_progress_and_sends_the_missing_runs_to_the_workers(
    imported_basics, httpserver, api_key, redis_url, staff_client, settings
):
    import redis

    settings.GENERATION_QUEUE = "eb-admin-test"
    broker = redis.Redis.from_url(redis_url)
    broker.delete("eb-admin-test")
    provider = make_provider(httpserver)
    study = panas_study("eb-admin", "Admin", llm_default_runs=3, llm_evoked_runs=1)
    StudySituation.objects.bulk_create(
        [StudySituation(study=study, situation=s) for s in Situation.objects.all()[:2]]
    )
    configured = Condition.objects.create(study=study, name="configured", kind=Condition.Kind.LLM)
    LLMConditionConfig.objects.create(condition=configured, provider=provider, model="m")
    Condition.objects.create(study=study, name="unconfigured", kind=Condition.Kind.LLM, position=1)
    url = f"/admin/generation/generationjob/study/{study.pk}/"

    page = staff_client.get(url).content.decode()
    assert "configured" in page and "0 / 5" in page

    response = staff_client.post(url, {"condition": "configured"}, follow=True)
    assert "Sent 5 runs to the workers." in response.content.decode()
    assert broker.llen("eb-admin-test") == 5  # five task messages wait on the generation queue
    response = staff_client.post(url, {}, follow=True)
    assert "LLM conditions without a model configuration: unconfigured" in response.content.decode()
    assert broker.llen("eb-admin-test") == 5  # nothing more sent
    broker.delete("eb-admin-test")


@pytest.mark.django_db
def test_a_missing_api_key_is_named_before_anything_is_sent(imported_basics, httpserver, monkeypatch):
    from django.core.management.base import CommandError

    monkeypatch.delenv("EB_TEST_API_KEY", raising=False)
    provider = make_provider(httpserver)
    study = panas_study("eb-nokey", "No key")
    condition = Condition.objects.create(study=study, name="keyless", kind=Condition.Kind.LLM)
    LLMConditionConfig.objects.create(condition=condition, provider=provider, model="m")
    for extra in ([], ["--on-workers"]):
        with pytest.raises(CommandError, match="keyless: .*EB_TEST_API_KEY.* is not set"):
            call_command("generate_questionnaire", "eb-nokey", *extra)
    assert QuestionnaireExchange.objects.count() == 0 and QuestionnaireRun.objects.count() == 0


@pytest.mark.django_db
def test_the_test_model_answers_a_panas_study_with_no_key_and_no_network(imported_basics, capsys):
    """A questionnaire study's LLM subject on the test model (a fresh `make run`'s provider): every run answered on
    the first ask, the negative feelings higher after a scenario than at baseline, the positive ones lower."""
    from kinds.questionnaire.analysis import emotionbench_analyse

    provider = Provider(name="test-model", kind="test", max_concurrency=4, requests_per_minute=6000)
    provider.full_clean()
    provider.save()
    study, condition, _ = panas_llm_study(
        "eb-test-model", provider, "test-model", "test", runs=(6, 3, 2), seed=4
    )
    call_command("generate_questionnaire", "eb-test-model", "--threads", "1")
    runs = QuestionnaireRun.objects.filter(condition=condition)
    assert runs.filter(phase="default").count() == 6 and runs.filter(phase="evoked").count() == 6
    exchanges = QuestionnaireExchange.objects.filter(condition=condition)
    assert exchanges.count() == 12 and set(exchanges.values_list("outcome", flat=True)) == {"parsed"}
    assert all("test model: placeholder reply" in e.model_returned for e in exchanges)
    analysis = emotionbench_analyse(study=study)
    na = analysis.get(condition="test", level="emotion", group="Anger", category="Negative Affect")
    pa = analysis.get(condition="test", level="emotion", group="Anger", category="Positive Affect")
    assert na.two_sample.mean_evoked > na.two_sample.mean_default
    assert pa.two_sample.mean_evoked < pa.two_sample.mean_default
