"""Prediction-powered estimates (analysis.ppi): held to ppi-python's own figures and to the definitions."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import ppi

REFERENCE = json.loads((Path(__file__).parent / "ppi_reference.json").read_text())


@pytest.mark.parametrize("case", REFERENCE["cases"], ids=[c["name"] for c in REFERENCE["cases"]])
def test_it_reproduces_ppi_python_figures(case):
    y, f, fu, level = case["y"], case["f"], case["f_unlabelled"], case["level"]
    tuned = ppi.ppi_mean(y, f, fu, level=level)
    assert tuned.estimate == pytest.approx(case["ppi_estimate"], abs=1e-12)
    assert [tuned.ci_low, tuned.ci_high] == pytest.approx(case["ppi_ci"], abs=1e-12)
    untuned = ppi.ppi_mean(y, f, fu, level=level, lam=1.0)
    assert [untuned.ci_low, untuned.ci_high] == pytest.approx(case["ppi_lam1_ci"], abs=1e-12)
    classical = ppi.classical_mean(y, level=level)
    assert [classical.ci_low, classical.ci_high] == pytest.approx(case["classical_ci"], abs=1e-12)
    assert 0.0 <= tuned.lam <= 1.0


def test_a_judge_against_people_gets_lambda_zero_and_the_human_only_interval():
    case = next(c for c in REFERENCE["cases"] if c["name"] == "contrary_judge")
    tuned = ppi.ppi_mean(case["y"], case["f"], case["f_unlabelled"])
    classical = ppi.classical_mean(case["y"])
    assert tuned.lam == 0.0
    assert (tuned.ci_low, tuned.ci_high) == pytest.approx((classical.ci_low, classical.ci_high))


def test_lambda_zero_is_the_classical_estimate_and_lambda_one_is_plain_ppi():
    rng = np.random.default_rng(3)
    y = (rng.random(200) < 0.4).astype(float)
    f = np.where(rng.random(200) < 0.7, y, 1 - y)
    fu = (rng.random(1000) < 0.45).astype(float)
    zero = ppi.ppi_mean(y, f, fu, lam=0.0)
    assert zero.estimate == pytest.approx(y.mean())
    assert zero.se == pytest.approx(ppi.classical_mean(y).se)
    one = ppi.ppi_mean(y, f, fu, lam=1.0)
    assert one.estimate == pytest.approx(fu.mean() + (y - f).mean())


def test_the_difference_of_independent_estimates_adds_variances():
    a = ppi.MeanEstimate(0.6, 0.03, 0, 0, 0.5)
    b = ppi.MeanEstimate(0.5, 0.04, 0, 0, 0.2)
    d = ppi.difference(a, b)
    assert d.estimate == pytest.approx(0.1)
    assert d.se == pytest.approx(0.05)
    assert d.ci_high - d.ci_low == pytest.approx(2 * 1.959964 * 0.05, rel=1e-5)


def test_the_variance_factor_matches_the_optimal_ppi_variance():
    # Large sample: Var(PPI at λ*) / Var(classical) → 1 − ρ² N/(N+n).
    rng = np.random.default_rng(5)
    n, big_n = 20000, 80000
    y = (rng.random(n) < 0.5).astype(float)
    f = np.where(rng.random(n) < 0.8, y, 1 - y)
    fu = (rng.random(big_n) < 0.5).astype(float)
    rho = np.corrcoef(y, f)[0, 1]
    ratio = (ppi.ppi_mean(y, f, fu).se / ppi.classical_mean(y).se) ** 2
    assert ratio == pytest.approx(ppi.variance_factor(rho, n, big_n), abs=0.01)
    assert ppi.variance_factor(0.0, 10, None) == 1.0
    with pytest.raises(ValueError):
        ppi.variance_factor(1.5, 10, 10)


def test_intervals_cover_the_true_share_in_simulation():
    rng = np.random.default_rng(11)
    hits, reps = 0, 400
    for _ in range(reps):
        truth = rng.random(1200) < 0.3
        judged = np.where(rng.random(1200) < 0.8, truth, rng.random(1200) < 0.5)
        e = ppi.ppi_mean(truth[:200], judged[:200], judged[200:])
        hits += e.ci_low <= 0.3 <= e.ci_high
    assert hits / reps >= 0.92  # nominal 0.95; bench/ppi.py measures it over 2,000 repetitions


@pytest.mark.parametrize(
    "y, f, fu",
    [([1.0], [1.0], [1.0]), ([1.0, 0.0], [1.0], [1.0]), ([1.0, 0.0], [1.0, 0.0], [])],
)
def test_it_refuses_arrays_it_cannot_use(y, f, fu):
    with pytest.raises(ValueError):
        ppi.ppi_mean(y, f, fu)


def _frames(seed=0):
    rng = np.random.default_rng(seed)
    human_rows, judge_rows = [], []
    for condition, p_good in (("human", 0.5), ("gpt4", 0.65)):
        for i in range(300):
            rid = f"{condition}-{i}"
            truth = 3 if rng.random() < p_good else int(rng.integers(1, 3))
            judge = truth if rng.random() < 0.8 else int(rng.integers(1, 4))
            judge_rows.append((rid, condition, judge))
            if i < 100:
                human_rows.append((rid, condition, truth))
    human = pd.DataFrame(human_rows, columns=["response_id", "condition", "value"])
    judge = pd.DataFrame(judge_rows, columns=["response_id", "condition", "value"])
    return human, judge


def test_the_share_table_puts_human_only_and_ppi_side_by_side():
    human, judge = _frames()
    shares, diffs = ppi.ppi_share_table(
        human=human, judge=judge, values=[1, 2, 3], labels=["Bad", "Okay", "Good"], baseline="human"
    )
    assert len(shares) == 6 and set(shares["value"]) == {"Bad", "Okay", "Good"}
    good = shares[(shares["condition"] == "gpt4") & (shares["value"] == "Good")].iloc[0]
    rated = human[human["condition"] == "gpt4"]
    assert good["human_estimate"] == pytest.approx((rated["value"] == 3).mean())
    assert (good["n"], good["N"], good["n_human"]) == (100, 200, 100)
    assert 0 <= good["ppi_lambda"] <= 1
    assert good["width_ratio"] < 1  # an 80%-agreeing judge narrows the interval
    # Human-only shares of a condition sum to one; so do the PPI ones (one λ per condition, for all its values).
    by_condition = shares.groupby("condition")
    assert by_condition["human_estimate"].sum().to_numpy() == pytest.approx([1, 1])
    assert by_condition["ppi_estimate"].sum().to_numpy() == pytest.approx([1, 1], abs=1e-12)
    d = diffs[diffs["value"] == "Good"].iloc[0]
    base = shares[(shares["condition"] == "human") & (shares["value"] == "Good")].iloc[0]
    assert d["ppi_estimate"] == pytest.approx(good["ppi_estimate"] - base["ppi_estimate"])
    assert d["human_se"] == pytest.approx(np.hypot(good["human_se"], base["human_se"]))


def test_judge_ratings_never_enter_the_human_only_columns():
    human, judge = _frames()
    before, _ = ppi.ppi_share_table(human=human, judge=judge, values=[1, 2, 3], baseline="human")
    flipped = judge.assign(value=4 - judge["value"])
    after, _ = ppi.ppi_share_table(human=human, judge=flipped, values=[1, 2, 3], baseline="human")
    human_columns = [c for c in before.columns if c.startswith("human_")]
    pd.testing.assert_frame_equal(before[human_columns], after[human_columns])
    assert not np.allclose(before["ppi_estimate"], after["ppi_estimate"])


def test_several_judge_samples_of_a_response_become_its_share():
    human = pd.DataFrame({"response_id": ["a", "b"], "condition": ["c", "c"], "value": [3, 1]})
    judge = pd.DataFrame(
        {"response_id": ["a", "a", "b", "b", "x"], "condition": ["c"] * 5, "value": [3, 3, 1, 3, 2]}
    )
    shares, _ = ppi.ppi_share_table(human=human, judge=judge, values=[1, 2, 3], baseline="c")
    good = shares[shares["value"] == "3"].iloc[0]
    # f on the labelled = (1.0, 0.5); on the unlabelled x = 0: λ·0 + mean(Y − λ f)
    y, f = np.array([1.0, 0.0]), np.array([1.0, 0.5])
    lam = good["ppi_lambda"]
    assert good["ppi_estimate"] == pytest.approx(np.mean(y - lam * f))


@pytest.mark.parametrize(
    "judge, message",
    [
        (pd.DataFrame({"response_id": ["a"], "condition": ["c"], "value": [7]}), "not on the scale"),
        (
            pd.DataFrame({"response_id": ["a", "a"], "condition": ["c", "d"], "value": [1, 2]}),
            "two conditions",
        ),
        (pd.DataFrame({"response_id": ["a"], "value": [1]}), "columns"),
    ],
)
def test_bad_judge_frames_are_refused_with_a_reason(judge, message):
    human = pd.DataFrame({"response_id": ["a"], "condition": ["c"], "value": [1]})
    with pytest.raises(ValueError, match=message):
        ppi.ppi_share_table(human=human, judge=judge, values=[1, 2, 3], baseline="c")
