"""Calibration on the published dataset, end to end: import the published ratings, run a judge through the Batch
API path against a loopback server speaking OpenAI's wire format, read the stored JudgeRating rows through
`generation.selectors.judge_ratings_frame`, and calibrate them against the human ratings read from the database.

The loopback judge answers each response with its human rating's label with probability 1 − p and one of the
other two labels otherwise (deterministic per response: seeded by the response's id), in assorted mark-up
("Good", "**Okay**", "bad."), so the reply parser is exercised on every line. The α and κ expected from that noise
are those of tests/analysis/test_calibration_published.py (the expected human × judge table); the stored
ratings must reproduce them within ±0.02."""

import io
import random
import time

import pytest
from django.core.management import call_command

from analysis import calibration
from generation.judge_batches import CUSTOM_ID_PREFIX, judge_batch_poll, judge_batch_submit
from generation.judge_models import JudgeRating
from generation.selectors import judge_progress, judge_ratings_frame
from kinds.rating.frame import rating_rows_frame
from studies.models import Study
from tests.analysis.test_calibration_published import expected_alpha, expected_kappa, expected_table
from tests.studies.helpers import DATASET

from .conftest import make_provider
from .judge_helpers import judge_reply_body, make_judge
from .test_batches import FakeBatchAPI

pytestmark = pytest.mark.django_db

LABELS = {1: "Bad", 2: "Okay", 3: "Good"}
STYLES = ("{}", "**{}**", "{}.", "{}\n", "Rating: {}")


def noisy_label(human_value: int, key: str, p: float, seed: int) -> str:
    rng = random.Random(f"{seed}:{key}")
    value = human_value
    if rng.random() < p:
        value = rng.choice([v for v in (1, 2, 3) if v != human_value])
    label = LABELS[value]
    return rng.choice(STYLES).format(rng.choice([label, label.lower(), label.upper()]))


@pytest.mark.parametrize("p", [0.1, 0.2])
def test_a_judge_run_on_the_published_study_reproduces_the_agreement_its_noise_implies(
    httpserver, api_key, p
):
    started = time.monotonic()
    call_command("import_ratings", "published", DATASET, stdout=io.StringIO(), stderr=io.StringIO())
    imported = time.monotonic()
    study = Study.objects.get(slug="published")
    human = rating_rows_frame(study=study).rename(columns={"participant_id": "rater"})
    assert len(human) == 6000 and human["response_id"].is_unique  # one published rating per response
    human_value = human.set_index("response_id")["value"].to_dict()

    fake = FakeBatchAPI(httpserver)
    provider = make_provider(httpserver, kind="openai")
    judge = make_judge(study, provider, name="loopback-judge")
    batch = judge_batch_submit(judge=judge, started_by="test")
    submitted = time.monotonic()
    assert batch.status == "submitted" and batch.ratings_total == 6000 and len(fake.requests) == 6000
    first = fake.requests[0]["body"]
    assert (
        first["model"] == "judge-test"
        and "Answer with exactly one word, one of: Good, Okay, Bad." in (first["messages"][0]["content"])
    )

    # Seeded by what identifies a response across databases (its condition and dialogue), not by its row id.
    response_of = {
        rating_id: (response_id, f"{condition}:{dialogue}")
        for rating_id, response_id, condition, dialogue in JudgeRating.objects.filter(judge=judge)
        .order_by()  # no default ordering: it joins three study rows for each of the 6,000, for nothing
        .values_list("id", "response_id", "response__condition__name", "response__prompt__dialogue_id")
    }

    def answer(line):
        response_id, key = response_of[int(line["custom_id"].removeprefix(CUSTOM_ID_PREFIX))]
        return 200, judge_reply_body(noisy_label(int(human_value[response_id]), key, p, seed=1))

    fake.finish(batch.provider_batch_id, answer)
    collected = judge_batch_poll(batch=batch)
    done = time.monotonic()
    assert (collected.status, collected.ratings_stored, collected.ratings_failed) == ("completed", 6000, 0)
    progress = judge_progress(judge=judge)
    assert (progress["done"], progress["pending"], progress["failed"]) == (6000, 0, 0)
    assert progress["spend"] == collected.cost > 0

    frame = judge_ratings_frame(judge=judge)
    flipped = (frame["value"].to_numpy() != frame["response_id"].map(human_value).to_numpy()).mean()
    result = calibration.calibrate(
        human=human,
        judge=frame[["response_id", "value"]],
        scale=[1, 2, 3],
        words=frame.set_index("response_id")["words"],
        b=200,
    )
    calibrated = time.monotonic()
    table = expected_table(human, p)
    assert result.responses == 6000
    assert result.judge_human.alpha.value == pytest.approx(expected_alpha(table), abs=0.02)
    assert result.judge_human.kappa_linear.value == pytest.approx(expected_kappa(table, 1), abs=0.02)
    assert result.judge_human.kappa_quadratic.value == pytest.approx(expected_kappa(table, 2), abs=0.02)
    print(
        f"\np={p} (realised {flipped:.4f}): import {imported - started:.1f}s, submit {submitted - imported:.1f}s, "
        f"collect {done - submitted:.1f}s, calibrate {calibrated - done:.1f}s; "
        f"alpha {result.judge_human.alpha.value:.3f} (expected {expected_alpha(table):.3f}), "
        f"kappa linear {result.judge_human.kappa_linear.value:.3f} (expected {expected_kappa(table, 1):.3f}), "
        f"kappa quadratic {result.judge_human.kappa_quadratic.value:.3f} (expected {expected_kappa(table, 2):.3f})"
    )
