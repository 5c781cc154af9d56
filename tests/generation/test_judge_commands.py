"""The judge from the terminal (judge_configure, judge_run in process and through the Batch API), screening of new
conditions' responses as they are generated, and judge ratings never reaching the human statistics."""

import json
from io import StringIO

import pandas as pd
import pytest
from django.core.management import CommandError, call_command

from analysis.services import AnalysisOptions, study_analyze
from generation.judge_models import Judge, JudgeRating
from generation.services import judging
from generation.services.dispatch import generation_start
from generation.services.review import response_regenerate
from generation.services.running import generation_item_run, run_until_settled
from studies.models import Response
from tests.analysis.builders import build_rating_study, participants_from_counts

from .conftest import json_response, make_provider, make_study, openai_body
from .judge_helpers import judge_reply_body, make_judge
from .test_batches import FakeBatchAPI

pytestmark = pytest.mark.django_db
CHAT = "/v1/chat/completions"


def _judge_or_generate(request):
    """One loopback endpoint for both: the judge model gets a label, every other model a response."""
    body = json.loads(request.get_data())
    if body["model"] == "judge-test":
        return judge_reply_body("Good.")
    return openai_body(f"So sorry to hear that ({len(body['messages'])}).")


def test_judge_configure_creates_a_judge_shows_what_it_sends_and_refuses_a_bad_rubric(
    httpserver, api_key, tmp_path
):
    provider = make_provider(httpserver)
    make_study(provider=provider, n_prompts=1)
    out = StringIO()
    call_command(
        "judge_configure", "gen-study", "gpt-judge", "--provider", provider.name, "--model", "judge-test",
        "--samples", "2", "--screens-new-conditions", stdout=out,
    )  # fmt: skip
    judge = Judge.objects.get(name="gpt-judge")
    assert (judge.n_samples, judge.screens_new_conditions, judge.temperature) == (2, True, 0.0)
    assert "Created judge gpt-judge" in out.getvalue()
    assert "Answer with exactly one word, one of: Good, Okay, Bad." in out.getvalue()
    assert len(httpserver.log) == 0

    rubric = tmp_path / "rubric.txt"
    rubric.write_text("Rate {response} for {audience}.")
    with pytest.raises(CommandError, match=r"rubric: Unknown placeholder\(s\) in the rubric: \{audience\}"):
        call_command(
            "judge_configure", "gen-study", "gpt-judge", "--rubric-file", str(rubric), stdout=StringIO()
        )
    assert Judge.objects.get(name="gpt-judge").rubric == judge.rubric  # unchanged


@pytest.mark.django_db(transaction=True)
def test_judge_run_in_process_rates_prints_counts_and_spend_and_resumes(threaded_server, api_key):
    provider = make_provider(threaded_server)
    study = make_study(provider=provider, n_prompts=4, conditions=())
    make_judge(study, provider, name="j")
    threaded_server.expect_request(CHAT).respond_with_json(judge_reply_body("Okay"))

    out = StringIO()
    call_command("judge_run", "gen-study", "j", "--in-process", "--no-progress", stdout=out)
    assert "4 new ratings, 4 to run" in out.getvalue()
    assert "Estimate: 4 calls, ~" in out.getvalue() and "through the Batch API" in out.getvalue()
    assert "Judge j (loop-openai/judge-test): 4/4 rated, 0 pending, 0 failed" in out.getvalue()
    assert "spend $0.0031" in out.getvalue()  # 4 × (300 × 2.5 + 2 × 10) / 1e6
    again = StringIO()
    call_command("judge_run", "gen-study", "j", "--in-process", "--no-progress", stdout=again)
    assert "0 new ratings, 0 to run" in again.getvalue() and len(threaded_server.log) == 4
    assert "Estimate: 0 calls" in again.getvalue()

    with pytest.raises(CommandError, match="no judge named 'nope' \\(its judges: j\\)"):
        call_command("judge_run", "gen-study", "nope", stdout=StringIO())
    with pytest.raises(CommandError, match="no condition named 'gpt9'"):
        call_command("judge_run", "gen-study", "j", "--conditions", "gpt9", stdout=StringIO())


class FinishingBatchAPI(FakeBatchAPI):
    """A provider that has finished the batch by the first poll, every line answered "bad"."""

    def retrieve(self, request):
        batch_id = request.path.rsplit("/", 1)[1]
        if self.batches[batch_id]["status"] == "validating":
            self.finish(batch_id, lambda line: (200, judge_reply_body("bad")))
        return super().retrieve(request)


def test_judge_run_batch_wait_submits_polls_and_collects(httpserver, api_key):
    FinishingBatchAPI(httpserver)
    provider = make_provider(httpserver)
    study = make_study(provider=provider, n_prompts=3)  # 3 human responses; the LLM condition has none yet
    make_judge(study, provider, name="j")
    out = StringIO()
    call_command("judge_run", "gen-study", "j", "--batch", "--wait", "--poll-seconds", "0.01", stdout=out)
    text = out.getvalue()
    assert "3 ratings submitted as batch batch_0." in text
    assert "batch batch_0: Completed (completed), 3 ratings, 3 stored, 0 failed, 0 given back" in text
    assert "3/3 rated" in text
    assert set(JudgeRating.objects.values_list("value", "provider_batch_id")) == {(1, "batch_0")}


# --- screening ------------------------------------------------------------------------------------------------


def test_a_screening_judge_rates_each_generated_response_as_it_is_stored(
    httpserver, api_key, django_capture_on_commit_callbacks
):
    provider = make_provider(httpserver)
    study = make_study(provider=provider, n_prompts=2, conditions=("gpt",))
    screening = make_judge(study, provider, name="screen", screens_new_conditions=True)
    quiet = make_judge(study, provider, name="quiet")
    httpserver.expect_request(CHAT).respond_with_handler(lambda r: json_response(_judge_or_generate(r)))
    started = generation_start(
        study=study, conditions=list(study.conditions.filter(kind="llm")), dispatch=False
    )

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        for item_id in started.item_ids:
            assert generation_item_run(item_id=item_id).status == "done"
    generated = set(Response.objects.filter(condition__name="gpt").values_list("id", flat=True))
    queued = JudgeRating.objects.filter(judge=screening)
    assert set(queued.values_list("response_id", flat=True)) == generated  # only the new responses
    assert set(queued.values_list("status", flat=True)) == {"pending"}
    assert not JudgeRating.objects.filter(judge=quiet).exists()
    assert len(callbacks) == 2  # one dispatch per stored response, after its commit

    for rating_id in queued.values_list("id", flat=True):
        run_until_settled(lambda i=rating_id: judging.judge_rating_run(rating_id=i))
    assert set(queued.values_list("status", "value")) == {("done", 3)}

    # A regenerated response's rating rated a text that is gone: it is reset and rated again.
    response = Response.objects.filter(condition__name="gpt").first()
    with django_capture_on_commit_callbacks(execute=False):
        response_regenerate(response=response)
        item_id = response.generation_item.id
        assert generation_item_run(item_id=item_id).status == "done"
    rating = JudgeRating.objects.get(judge=screening, response=response)
    assert (rating.status, rating.value) == ("pending", None)


# --- the human statistics ---------------------------------------------------------------------------------------


def test_judge_ratings_never_change_the_human_statistics(httpserver, api_key):
    people = participants_from_counts("human", {1: 15, 2: 25, 3: 10}, emotion="sad")
    people += participants_from_counts("gpt4", {1: 10, 2: 20, 3: 20}, emotion="sad")
    study = build_rating_study(slug="rated", conditions=["human", "gpt4"], participants=people).study
    options = AnalysisOptions(bootstrap_samples=50)
    before = study_analyze(study=study, options=options)

    provider = make_provider(httpserver)
    judge = make_judge(study, provider, n_samples=2)
    judging.judge_enqueue(judge=judge)
    # Every response rated Good by the judge, twice: far from what people said.
    JudgeRating.objects.filter(judge=judge).update(status="done", value=3, reply_text="Good")
    assert (
        JudgeRating.objects.filter(judge=judge, status="done").count()
        == 2 * Response.objects.filter(condition__study=study).count()
    )
    after = study_analyze(study=study, options=options)

    assert after.n_rows == before.n_rows
    for name, table in before.tables().items():
        pd.testing.assert_frame_equal(table, after.tables()[name], obj=name)
    assert json.dumps(before.summary(), sort_keys=True, default=str) == json.dumps(
        after.summary(), sort_keys=True, default=str
    )


def test_an_edited_response_is_rated_again_by_every_judge(httpserver, api_key, django_user_model):
    from generation.services.review import response_edit

    provider = make_provider(httpserver)
    study = make_study(provider=provider, n_prompts=2, conditions=())
    judges = [make_judge(study, provider, name=name) for name in ("a", "b")]
    for judge in judges:
        judging.judge_enqueue(judge=judge)
    JudgeRating.objects.update(status="done", value=2, reply_text="Okay")
    response = Response.objects.order_by("id").first()
    editor = django_user_model.objects.create_user(username="ed", password="x-long-password-1")
    response_edit(response=response, text="I am so sorry. Do you want to talk about him?", user=editor)
    reset = JudgeRating.objects.filter(response=response)
    assert set(reset.values_list("status", "value")) == {("pending", None)} and reset.count() == 2
    assert set(JudgeRating.objects.exclude(response=response).values_list("status", flat=True)) == {"done"}


def test_a_refused_batch_upload_gives_every_rating_back_and_says_why(httpserver, api_key):
    from generation.judge_batches import judge_batch_submit
    from generation.judge_models import JudgeBatch

    fake = FakeBatchAPI(httpserver)
    fake.refuse_upload = True
    provider = make_provider(httpserver)
    study = make_study(provider=provider, n_prompts=3, conditions=())
    judge = make_judge(study, provider)
    with pytest.raises(judging.JudgeSetupError, match="submitting the batch failed: .*Invalid file format"):
        judge_batch_submit(judge=judge)
    ratings = JudgeRating.objects.filter(judge=judge)
    assert set(ratings.values_list("status", "attempts", "claim_token")) == {("pending", 0, "")}
    batch = JudgeBatch.objects.get()
    assert (batch.status, batch.ratings_returned) == ("failed", 3) and "Invalid file format" in batch.error
    anthropic = make_provider(httpserver, kind="anthropic", name="claude")
    judge.provider = anthropic
    judge.save()
    with pytest.raises(judging.JudgeSetupError, match="has no Batch API here"):
        judge_batch_submit(judge=judge)
