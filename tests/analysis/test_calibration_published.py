"""Calibration on the published ratings with a simulated judge whose noise is known.

The judge gives the human majority of each response (with one published rating per response: that rating), and
with probability p replaces it by one of the other two values at random (seeded). The α and κ expected from that
noise follow from the expected human × judge table: E[C_ii] = n_i (1 − p), E[C_ik] = n_i p / 2 (k ≠ i); κ is
Cohen's weighted κ of that table and α Krippendorff's ordinal α of its coincidence matrix C + Cᵀ, both written out
here by hand. calibration.py must reproduce them within ±0.02. Bernoulli flipping moves the realised table around
its expectation: at 6,000 ratings the standard deviation of α is about 0.006 at p = 0.1 and 0.01 at p = 0.3 (0.012
at p = 0.5, a judge no study would use, which is why the noise levels tested stop at 0.3); the average over many
seeds is held to the expectation more tightly.
"""

import numpy as np
import pandas as pd
import pytest

from analysis import calibration

from .published import published_human_ratings

SCALE = [1, 2, 3]


@pytest.fixture(scope="module")
def published():
    return published_human_ratings()


def majority(human: pd.DataFrame) -> pd.Series:
    """Each response's most frequent human rating (ties: the lowest)."""
    counts = human.groupby(["response_id", "value"]).size().rename("n").reset_index()
    counts = counts.sort_values(["response_id", "n", "value"], ascending=[True, False, True])
    return counts.drop_duplicates("response_id").set_index("response_id")["value"]


def noisy_majority_judge(human: pd.DataFrame, p: float, seed: int, majority_values=None) -> pd.DataFrame:
    majority_values = majority(human) if majority_values is None else majority_values
    rng = np.random.default_rng(seed)
    values = majority_values.to_numpy()
    flip = rng.random(values.size) < p
    other = (values - 1 + rng.integers(1, 3, values.size)) % 3 + 1  # one of the other two values
    return pd.DataFrame({"response_id": majority_values.index, "value": np.where(flip, other, values)})


def expected_table(human: pd.DataFrame, p: float) -> np.ndarray:
    n = human["value"].value_counts().reindex(SCALE, fill_value=0).to_numpy(float)
    table = np.empty((3, 3))
    for i in range(3):
        for k in range(3):
            table[i, k] = n[i] * (1 - p) if i == k else n[i] * p / 2
    return table


def expected_kappa(table: np.ndarray, power: int) -> float:
    total = table.sum()
    rows, cols = table.sum(axis=1) / total, table.sum(axis=0) / total
    observed = expected = 0.0
    for i in range(3):
        for k in range(3):
            w = abs(i - k) ** power
            observed += w * table[i, k] / total
            expected += w * rows[i] * cols[k]
    return 1 - observed / expected


def expected_alpha(table: np.ndarray) -> float:
    o = table + table.T
    n_c = o.sum(axis=1)
    n = n_c.sum()

    def delta2(c, k):
        lo, hi = min(c, k), max(c, k)
        return (sum(n_c[g] for g in range(lo, hi + 1)) - (n_c[c] + n_c[k]) / 2) ** 2

    d_o = sum(o[c, k] * delta2(c, k) for c in range(3) for k in range(3))
    d_e = sum(n_c[c] * n_c[k] * delta2(c, k) for c in range(3) for k in range(3))
    return 1 - (n - 1) * d_o / d_e


@pytest.mark.parametrize("p", [0.05, 0.1, 0.2, 0.3])
def test_alpha_and_kappa_reproduce_the_values_expected_from_the_noise(published, p):
    judge = noisy_majority_judge(published, p, seed=int(p * 100))
    result = calibration.calibrate(
        human=published, judge=judge, scale=SCALE, words=published.set_index("response_id")["words"], b=200
    )
    table = expected_table(published, p)
    assert result.responses == 6000
    assert result.judge_human.alpha.value == pytest.approx(expected_alpha(table), abs=0.02)
    assert result.judge_human.kappa_linear.value == pytest.approx(expected_kappa(table, 1), abs=0.02)
    assert result.judge_human.kappa_quadratic.value == pytest.approx(expected_kappa(table, 2), abs=0.02)
    # the bootstrap interval is about the sampling noise's size and holds the expected value
    assert result.judge_human.alpha.ci_low <= expected_alpha(table) + 0.02
    assert result.judge_human.alpha.ci_high >= expected_alpha(table) - 0.02
    # one rating per response: no human–human figure and no alt-test, said so
    assert result.human_human.alpha is None and not result.alt_test.applicable


def test_the_expected_values_are_those_of_a_large_independent_simulation(published):
    # The plug-in expectation is what averaging many noisy judges gives (the ratio's bias is O(1/n)).
    values = majority(published)
    runs = [
        calibration.judge_human_agreement(
            calibration.pairs_frame(
                published, noisy_majority_judge(published, 0.5, seed=s, majority_values=values)
            ),
            SCALE,
            b=2,
        )
        for s in range(1000, 1030)
    ]
    table = expected_table(published, 0.5)
    assert np.mean([r.alpha.value for r in runs]) == pytest.approx(expected_alpha(table), abs=0.006)
    assert np.mean([r.kappa_quadratic.value for r in runs]) == pytest.approx(
        expected_kappa(table, 2), abs=0.006
    )


def test_a_noise_free_judge_agrees_perfectly(published):
    judge = noisy_majority_judge(published, 0.0, seed=0)
    result = calibration.calibrate(human=published, judge=judge, scale=SCALE, b=50)
    assert result.judge_human.alpha.value == pytest.approx(1.0)
    assert result.judge_human.kappa_quadratic.value == pytest.approx(1.0)
    assert result.may_screen
