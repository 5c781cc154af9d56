"""manage.py study_power <slug> [--json]: participants per condition for the planned tests of a stored study."""

import json
import math

import pytest
from django.core.management import CommandError, call_command

from analysis import power
from studies.models import Condition, Study

from .builders import build_rating_study, participants_from_counts

pytestmark = pytest.mark.django_db


def run(*args) -> dict:
    from io import StringIO

    out = StringIO()
    call_command("study_power", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.fixture
def fresh_study(db):
    """A draft study with three conditions and no ratings yet, 8 items per participant."""
    study = Study.objects.create(slug="fresh", title="Fresh", items_per_participant=8)
    for i, name in enumerate(["human", "gpt4", "llama"]):
        Condition.objects.create(study=study, name=name, position=i, is_baseline=name == "human")
    return study


def test_without_ratings_it_plans_from_the_seed_studys_published_shares(fresh_study):
    data = run("fresh")
    assert data["baseline"] == "human" and data["comparisons"] == 2 and data["items_per_participant"] == 8
    assert data["shares"]["human"] == list(power.SEED_SHARES["human"])
    assert data["shares"]["gpt4"] == list(power.SEED_SHARES["chatgpt_empathy"])
    assert data["share_sources"]["human"] == "seed study (human)"
    lines = data["lines"]
    assert {(line["condition"], line["test"], line["power"]) for line in lines} == {
        (c, t, p)
        for c in ("gpt4", "llama")
        for t in (power.TEST_2X3, power.TEST_2X2_YATES)
        for p in (0.8, 0.9)
    }
    line = next(
        x for x in lines if x["test"] == power.TEST_2X3 and x["power"] == 0.8 and x["condition"] == "gpt4"
    )
    expected = power.chi2_ratings_per_condition(
        power.SEED_SHARES["human"], power.SEED_SHARES["chatgpt_empathy"], alpha=0.025, power=0.8
    )
    assert line["alpha_first_step"] == pytest.approx(0.025)
    # No ratings yet: the seed study's largest within-rater ICC sets the design effect, and the plan says so.
    assert data["icc"] == max(power.SEED_ICC.values()) and "seed study" in data["design_effect_source"]
    assert data["design_effect"] == pytest.approx(1 + 7 * data["icc"])
    assert line["ratings_per_condition"] == math.ceil(expected * data["design_effect"] - 1e-9)
    assert line["participants_per_condition"] == math.ceil(line["ratings_per_condition"] / 8)


def test_the_stored_baselines_observed_shares_are_the_default(db):
    people = participants_from_counts("human", {1: 10, 2: 20, 3: 10})  # Bad 25%, Okay 50%, Good 25%
    people += participants_from_counts("gpt4", {1: 10, 2: 10, 3: 20})
    build_rating_study(
        slug="rated-power", conditions=["human", "gpt4"], participants=people, baseline="human"
    )
    data = run("rated-power")
    assert data["shares"]["human"] == pytest.approx([0.25, 0.5, 0.25])
    assert data["share_sources"]["human"] == "observed (40 ratings)"
    assert data["design_effect_source"] == "estimated from the baseline's ratings" and data["icc"] is not None
    # the other condition keeps the seed study's effect unless told otherwise
    assert data["shares"]["gpt4"] == list(power.SEED_SHARES["chatgpt_empathy"])
    assert data["comparisons"] == 1 and data["lines"][0]["alpha_first_step"] == 0.05


def test_a_handful_of_ratings_is_not_enough_to_replace_the_seed_shares(db):
    people = participants_from_counts("human", {1: 5, 2: 5, 3: 10})
    build_rating_study(slug="few", conditions=["human", "gpt4"], participants=people, baseline="human")
    assert run("few")["share_sources"]["human"] == "seed study (human)"


def test_flags_override_shares_alpha_items_and_add_the_ppi_columns(fresh_study):
    data = run(
        "fresh",
        "--shares", "human=0.2,0.4,0.4",
        "--alternative-shares", "0.1,0.3,0.6",
        "--alpha", "0.01",
        "--items", "20",
        "--design-effect", "1.2",
        "--power", "0.9",
        "--judge-correlation", "0.7",
        "--judge-ratio", "5",
    )  # fmt: skip
    assert data["shares"]["human"] == [0.2, 0.4, 0.4] and data["shares"]["llama"] == [0.1, 0.3, 0.6]
    assert data["share_sources"]["gpt4"] == "given (all conditions)"
    assert {line["power"] for line in data["lines"]} == {0.9}
    line = data["lines"][0]
    assert line["alpha_first_step"] == pytest.approx(0.005)
    raw = power.chi2_ratings_per_condition([0.2, 0.4, 0.4], [0.1, 0.3, 0.6], alpha=0.005, power=0.9)
    assert line["ratings_per_condition"] == math.ceil(raw * 1.2)
    assert line["participants_per_condition"] == math.ceil(line["ratings_per_condition"] / 20)
    assert line["ppi_ratings_per_condition"] == pytest.approx(raw * 1.2 * (1 - 0.49 * 5 / 6), abs=1)


def test_the_text_output_lists_every_planned_test(fresh_study, capsys):
    call_command("study_power", "fresh", "--judge-correlation", "0.6")
    out = capsys.readouterr().out
    assert "baseline human" in out and "first Holm step at α 0.025" in out
    assert out.count(power.TEST_2X2_YATES) == 4 and "PPI ratings" in out
    assert "[seed study (chatgpt_empathy)]" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope"], "no study"),
        (["fresh", "--shares", "gpt9=0.1,0.2,0.7"], "not conditions of this study"),
        (["fresh", "--shares", "human=0.5,0.6,0.1"], "sum to 1"),
        (["fresh", "--shares", "human"], "CONDITION=B,O,G"),
        (["fresh", "--alternative-shares", "a,b,c"], "comma-separated numbers"),
        (["fresh", "--alpha", "2"], "α"),
        (["fresh", "--items", "0"], "items"),
    ],
)
def test_bad_requests_are_refused_with_a_reason(fresh_study, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("study_power", *args)


def test_questionnaire_studies_and_other_scales_are_refused(db):
    Study.objects.create(slug="eb", title="EB", kind=Study.Kind.QUESTIONNAIRE)
    with pytest.raises(CommandError, match="questionnaire study: its kind plans no power"):
        call_command("study_power", "eb")
    five = Study.objects.create(
        slug="five", title="Five", scale=[{"value": v, "label": str(v)} for v in range(1, 6)]
    )
    Condition.objects.create(study=five, name="human", is_baseline=True)
    Condition.objects.create(study=five, name="gpt4", position=1)
    with pytest.raises(CommandError, match="give them explicitly"):
        call_command("study_power", "five")
    data = run("five", "--shares", "human=0.2,0.2,0.2,0.2,0.2", "--alternative-shares", "0.1,0.1,0.2,0.3,0.3")
    assert len(data["lines"]) == 4
