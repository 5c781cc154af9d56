"""The LLM judge answering a pairwise study's pairs, in both orders, through the judge's one machinery (rows,
claims, retries, spend, the judge_run command), against a loopback provider speaking OpenAI's wire format; its
flips reported by the pairwise analysis (`analyze --out`: judge_pairwise.csv, judge_flips.csv)."""

import csv
import json
import re
from decimal import Decimal
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from werkzeug import Response as WResponse

from generation.judge_formats import DEFAULT_PAIR_RUBRIC, verdict_read
from generation.judge_models import DEFAULT_RUBRIC, JudgeRating
from generation.providers import TransientProviderError
from generation.selectors import judge_progress, judge_verdicts_frame
from generation.services import judging
from generation.services.running import RunOutcome, run_until_settled
from studies.models import Response
from tests.analysis.test_pairwise_analysis import votes
from tests.factories import pairwise_study_build

from .conftest import make_provider, race
from .judge_helpers import judge_reply_body, make_judge
from .test_batches import FakeBatchAPI

CHAT = "/v1/chat/completions"
QUALITY = {"arm0": 0, "arm1": 1, "arm2": 2}  # the loopback judge prefers the better condition
REPLY = re.compile(r"Reply A: reply of (arm\d) on (p\d+)\.\nReply B: reply of (arm\d) on p\d+\.")


def pair_study(prompts=4):
    study = pairwise_study_build(
        conditions=3, prompts=prompts, items_per_participant=3, quota_per_condition=50
    )
    for n, prompt in enumerate(study.prompts.order_by("pk")):
        for response in Response.objects.filter(prompt=prompt).select_related("condition"):
            response.text = f"reply of {response.condition.name} on p{n}."
            response.save(update_fields=["text"])
    return study


def sent_pair_of(content: str) -> tuple[str, str, str]:
    """(condition shown as A, prompt, condition shown as B) of a judge request's message."""
    a, prompt, b = REPLY.search(content).groups()
    return a, prompt, b


def sent_pair(request) -> tuple[str, str, str]:
    return sent_pair_of(request.get_json()["messages"][-1]["content"])


def biased_judge(*, position_biased_prompt="p0", unreadable=()):
    """A loopback judge preferring the better condition, answering "A" whatever is shown on one prompt (its
    verdicts there flip with the order), and an unreadable reply for the (A, prompt, B) in `unreadable`."""

    def handler(request):
        a, prompt, b = sent_pair(request)
        if (a, prompt, b) in unreadable:
            text = "Both replies are quite nice, I would say A or maybe B."
        elif prompt == position_biased_prompt:
            text = "**A**"
        else:
            text = "A" if QUALITY[a] > QUALITY[b] else "B both inadequate" if a == "arm0" else "Verdict: B"
        return WResponse(json.dumps(judge_reply_body(text)), content_type="application/json")

    return handler


@pytest.mark.parametrize(
    "reply, verdict",
    [
        ("A", (1, False)),
        ("**B**", (2, False)),
        ("Verdict: SAME", (3, False)),
        ("about the same", (3, False)),
        ("same; both inadequate.", (3, True)),
        ("A BOTH INADEQUATE", (1, True)),
    ],
)
def test_a_verdict_is_read_strictly(reply, verdict):
    assert verdict_read(reply) == verdict


@pytest.mark.parametrize("reply", ["", "A or B", "Reply A", "I prefer A", "B is better", "tie", "C"])
def test_anything_else_is_an_unparseable_reply_quoting_it(reply):
    with pytest.raises(TransientProviderError) as caught:
        verdict_read(reply)
    assert caught.value.kind == "unparseable" and repr(reply.strip()) in str(caught.value)


@pytest.mark.django_db
def test_a_pairwise_judge_gets_the_pairwise_rubric_and_refuses_a_scale_placeholder(openai_provider):
    study = pair_study()
    judge = make_judge(study, openai_provider)
    assert judge.rubric == DEFAULT_PAIR_RUBRIC != DEFAULT_RUBRIC
    system, messages = judging.judge_example(judge=judge)
    assert "Reply A: reply of arm" in messages[0]["content"]
    judge.rubric = "Rate {response} on {scale}"
    with pytest.raises(ValidationError) as caught:
        judge.full_clean()
    assert "{response}" in str(caught.value)


@pytest.mark.django_db(transaction=True)
def test_the_judge_answers_every_pair_in_both_orders_and_its_flips_are_reported(
    threaded_server, api_key, tmp_path, client, staff_user
):
    provider = make_provider(threaded_server)
    study = pair_study(prompts=4)
    votes(study, 6)  # people's votes: the analysis needs some
    judge = make_judge(study, provider)
    threaded_server.expect_request(CHAT).respond_with_handler(biased_judge())
    client.force_login(staff_user)
    page = f"/analysis/{study.slug}/pairwise/"
    assert (
        "judge_flips.csv" not in client.get(page).content.decode()
    )  # computed and kept before the judge ran

    out = StringIO()
    call_command("judge_run", study.slug, judge.name, "--in-process", "--no-progress", stdout=out)

    # 4 prompts × 3 condition pairs × 2 orders, each order its own row, each called once.
    rows = list(JudgeRating.objects.filter(judge=judge).select_related("response", "versus"))
    assert len(rows) == 24 and {r.status for r in rows} == {"done"}
    assert len(threaded_server.log) == 24
    orders = {(r.response_id, r.versus_id) for r in rows}
    assert all((v, r) in orders for r, v in orders)
    assert judge_progress(judge=judge)["slots"] == 24
    # Spend: every call at the provider's prices, (300 × 2.5 + 2 × 10) / 10⁶ USD each.
    assert sum(r.cost for r in rows) == 24 * Decimal("0.00077")
    inadequate = [r for r in rows if r.both_inadequate]
    assert inadequate and all(r.response.condition.name == "arm0" for r in inadequate)

    verdicts = judge_verdicts_frame(judge=judge)
    assert len(verdicts) == 24 and set(verdicts["choice"]) == {"left", "right"}

    call_command("analyze", study.slug, "--out", str(tmp_path), "--bootstrap", "40", stdout=StringIO())
    with open(tmp_path / "judge_pairwise.csv") as f:
        pairs = list(csv.DictReader(f))
    assert len(pairs) == 12  # each pair once, with both orders' verdicts
    first_prompt = study.prompts.order_by("pk").first().dialogue_id
    for pair in pairs:
        flipped = pair["prompt_id"] == first_prompt  # "A" in both orders: a different winner each time
        assert pair["flipped"] == str(flipped) and pair["reversed"] == str(flipped)
        assert pair["verdict"] == ("tie" if flipped else "b")  # b: the better condition, by name
    with open(tmp_path / "judge_flips.csv") as f:
        flips = {row["scope"]: row for row in csv.DictReader(f)}
    assert flips["all"]["pairs"] == "12" and flips["all"]["flips"] == "3"
    assert float(flips["all"]["flip_rate"]) == pytest.approx(0.25)
    assert {scope: row["flips"] for scope, row in flips.items() if scope != "all"} == {
        "arm0 vs arm1": "1",
        "arm0 vs arm2": "1",
        "arm1 vs arm2": "1",
    }
    with open(tmp_path / "judge_bt_scores.csv") as f:
        scores = {row["condition"]: row for row in csv.DictReader(f)}
    assert float(scores["arm0"]["judge_strength"]) == 0.0
    assert float(scores["arm2"]["judge_strength"]) > float(scores["arm1"]["judge_strength"]) > 0
    assert scores["arm2"]["human_strength"] != ""
    assert (tmp_path / "judge_calibration.csv").exists()
    # The analysts' page and the API: the judge's new verdicts make the kept analysis stale.
    assert "judge_flips.csv" in client.get(page).content.decode()
    served = client.get(f"/api/studies/{study.slug}/pairwise/judge_flips.csv")
    assert served.status_code == 200 and served.content.startswith(b"judge,scope,pairs,flips")


@pytest.mark.django_db
def test_an_unreadable_verdict_is_retried_then_refused_with_the_reply_quoted_and_every_call_paid(
    httpserver, api_key
):
    provider = make_provider(httpserver, max_attempts=3)
    study = pair_study(prompts=1)
    judge = make_judge(study, provider)
    httpserver.expect_request(CHAT).respond_with_handler(biased_judge(unreadable={("arm1", "p0", "arm2")}))
    started = judging.judge_start(judge=judge, dispatch=False)
    for rating_id in started.rating_ids:
        run_until_settled(lambda i=rating_id: judging.judge_rating_run(rating_id=i))

    failed = JudgeRating.objects.get(status="failed")
    assert (failed.response.condition.name, failed.versus.condition.name) == ("arm1", "arm2")
    assert failed.error_kind == "unparseable" and "I would say A or maybe B" in failed.last_error
    assert failed.attempts == 3 and failed.cost == 3 * Decimal("0.00077")
    assert JudgeRating.objects.filter(status="done").count() == 5
    assert len(httpserver.log) == 5 + 3


@pytest.mark.django_db(transaction=True)
def test_judge_runs_started_at_once_create_each_order_of_each_pair_once_and_call_it_once(
    threaded_server, api_key, requires_postgres
):
    # Eight starts race to create the rows (the partial unique constraint on judge, A, B, sample keeps one per
    # order), then eight workers race on each row (one claim wins).
    provider = make_provider(threaded_server)
    study = pair_study(prompts=1)
    judge = make_judge(study, provider)
    threaded_server.expect_request(CHAT).respond_with_handler(biased_judge(position_biased_prompt=None))

    race(lambda: RunOutcome(str(judging.judge_start(judge=judge, dispatch=False).created)), 8)
    ids = list(JudgeRating.objects.filter(judge=judge).values_list("id", flat=True))
    assert len(ids) == 6
    for rating_id in ids:
        outcomes = race(lambda i=rating_id: judging.judge_rating_run(rating_id=i), 4)
        assert sorted(outcomes) == ["done"] + ["skipped"] * 3
    assert len(threaded_server.log) == 6


@pytest.mark.django_db
def test_a_screening_judge_gets_the_pairs_showing_a_new_reply_in_both_orders(openai_provider):
    study = pair_study(prompts=2)
    judge = make_judge(study, openai_provider, screens_new_conditions=True)
    new = Response.objects.filter(condition__name="arm2").order_by("pk").first()
    ids = judging.screening_enqueue(response=new)
    rows = JudgeRating.objects.filter(id__in=ids).select_related("response", "versus")
    assert (
        len(ids) == 4 == JudgeRating.objects.filter(judge=judge).count()
    )  # against arm0 and arm1, both orders
    assert all(new in (row.response, row.versus) for row in rows)
    assert {(r.response.condition.name, r.versus.condition.name) for r in rows} == {
        ("arm2", "arm0"), ("arm0", "arm2"), ("arm2", "arm1"), ("arm1", "arm2"),
    }  # fmt: skip


@pytest.mark.django_db
def test_the_rating_judge_report_sends_a_pairwise_judge_to_the_pairwise_analysis(openai_provider):
    study = pair_study(prompts=1)
    make_judge(study, openai_provider, name="pj")
    with pytest.raises(CommandError) as caught:
        call_command("judge_report", study.slug, "pj", stdout=StringIO())
    assert f"/analysis/{study.slug}/pairwise/" in str(caught.value)


class PositionLedBatchAPI(FakeBatchAPI):
    """A Batch API that has finished by the first poll, every line answered "A" (whatever is shown as A)."""

    def retrieve(self, request):
        batch_id = request.path.rsplit("/", 1)[1]
        if self.batches[batch_id]["status"] == "validating":
            self.finish(batch_id, lambda line: (200, judge_reply_body("A")))
        return super().retrieve(request)


@pytest.mark.django_db
def test_a_pairwise_judge_through_the_batch_api_sends_both_orders_and_every_pair_flips(httpserver, api_key):
    api = PositionLedBatchAPI(httpserver)
    provider = make_provider(httpserver)
    study = pair_study(prompts=2)
    judge = make_judge(study, provider, name="j")
    out = StringIO()
    call_command("judge_run", study.slug, "j", "--batch", "--wait", "--poll-seconds", "0.01", stdout=out)
    assert "12 ratings submitted as batch batch_0." in out.getvalue()
    shown = {sent_pair_of(line["body"]["messages"][-1]["content"]) for line in api.requests}
    assert len(shown) == 12 and all((b, p, a) in shown for a, p, b in shown)  # each pair in both orders
    verdicts = judge_verdicts_frame(judge=judge)
    assert len(verdicts) == 12 and set(verdicts["choice"]) == {"left"}
    assert judge_progress(judge=judge)["done"] == 12
