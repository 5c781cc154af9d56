"""Power before launch (analysis.power): statsmodels' own figures, Yates against simulation, the plan's arithmetic."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2_contingency
from statsmodels.stats.gof import chisquare_effectsize
from statsmodels.stats.power import GofChisquarePower, NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize

from analysis import power
from analysis.clustered import icc_anova
from tests.analysis.published import DATASET

HUMAN = power.SEED_SHARES["human"]
GPT4 = power.SEED_SHARES["chatgpt_empathy"]
OTHER = (0.12, 0.33, 0.55)


def statsmodels_ratings_per_group(base, cond, alpha, target):
    """statsmodels called directly: w of the joint table with equal groups, GofChisquarePower, total / 2."""
    base, cond = np.asarray(base), np.asarray(cond)
    joint = np.concatenate([cond, base]) / 2
    independent = np.tile((cond + base) / 4, 2)
    w = chisquare_effectsize(independent, joint)
    total = GofChisquarePower().solve_power(w, nobs=None, alpha=alpha, power=target, n_bins=len(base))
    return total / 2


@pytest.mark.parametrize("target", [0.8, 0.9])
@pytest.mark.parametrize("cond", [GPT4, OTHER])
@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_the_2x3_figures_equal_statsmodels_own_within_one_percent(target, cond, alpha):
    mine = power.chi2_ratings_per_condition(HUMAN, cond, alpha=alpha, power=target)
    theirs = statsmodels_ratings_per_group(HUMAN, cond, alpha, target)
    assert mine == pytest.approx(theirs, rel=0.01)
    # and the power statsmodels gives at that size is the target
    w = power.cohens_w(HUMAN, cond)
    assert GofChisquarePower().power(w, nobs=2 * mine, alpha=alpha, n_bins=3) == pytest.approx(
        target, rel=0.01
    )


@pytest.mark.parametrize("target", [0.8, 0.9])
def test_the_plan_reports_statsmodels_figures_at_the_bonferroni_level(target):
    shares = {"human": HUMAN, "gpt4": GPT4, "other": OTHER}
    lines = power.power_plan(
        baseline="human", shares=shares, alpha=0.05, powers=[target], items_per_participant=10
    )
    assert {(line.condition, line.test) for line in lines} == {
        (c, t) for c in ("gpt4", "other") for t in (power.TEST_2X3, power.TEST_2X2_YATES)
    }
    for line in lines:
        assert line.alpha_first_step == pytest.approx(0.025)  # Holm's first step: α / 2 comparisons
        cond = shares[line.condition]
        if line.test == power.TEST_2X3:
            theirs = statsmodels_ratings_per_group(HUMAN, cond, 0.025, target)
        else:
            theirs = statsmodels_ratings_per_group(
                [1 - HUMAN[2], HUMAN[2]], [1 - cond[2], cond[2]], 0.025, target
            )
        assert line.ratings_uncorrected == pytest.approx(theirs, rel=0.01)
        assert line.participants_per_condition == math.ceil(line.ratings_per_condition / 10)


def test_the_two_proportion_reference_is_statsmodels_normal_ind_power():
    theirs = NormalIndPower().solve_power(
        abs(proportion_effectsize(GPT4[2], HUMAN[2])), nobs1=None, alpha=0.05, power=0.8, ratio=1.0
    )
    mine = power.normal_ind_ratings_per_condition(GPT4[2], HUMAN[2], alpha=0.05, power=0.8)
    assert mine == pytest.approx(theirs, rel=0.01)
    # the chi-square figure without correction agrees with the z-test to within a few per cent
    plain = power.chi2_ratings_per_condition(
        [1 - HUMAN[2], HUMAN[2]], [1 - GPT4[2], GPT4[2]], alpha=0.05, power=0.8
    )
    assert plain == pytest.approx(mine, rel=0.05)


def simulated_yates_power(n, p1, p2, alpha, reps, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.binomial(n, p1, reps), rng.binomial(n, p2, reps)
    rejections = 0
    for x, y in zip(a, b, strict=True):
        table = [[x, n - x], [y, n - y]]
        rejections += chi2_contingency(table, correction=True).pvalue < alpha
    return rejections / reps


@pytest.mark.parametrize("p_cond, p_base, alpha", [(GPT4[2], HUMAN[2], 0.05), (0.3, 0.2, 0.025)])
def test_the_yates_approximation_matches_a_simulation_of_scipys_corrected_test(p_cond, p_base, alpha):
    n = math.ceil(power.yates_ratings_per_condition(p_cond, p_base, alpha=alpha, power=0.8))
    simulated = simulated_yates_power(n, p_cond, p_base, alpha, reps=4000, seed=1)
    # Monte Carlo SE ≈ 0.0063 at 4,000 repetitions
    assert simulated == pytest.approx(0.8, abs=0.025)
    assert power.yates_power(n, p_cond, p_base, alpha=alpha) == pytest.approx(0.8, abs=0.005)
    # Yates' correction costs ratings: more than the uncorrected test needs
    plain = power.chi2_ratings_per_condition(
        [1 - p_base, p_base], [1 - p_cond, p_cond], alpha=alpha, power=0.8
    )
    assert n > plain


def test_more_power_more_participants_and_clustering_multiplies_them():
    shares = {"human": HUMAN, "gpt4": GPT4}
    plain = power.power_plan(baseline="human", shares=shares, items_per_participant=10)
    clustered = power.power_plan(baseline="human", shares=shares, items_per_participant=10, design_effect=1.5)
    by = {(line.test, line.power): line for line in plain}
    assert (
        by[(power.TEST_2X3, 0.9)].participants_per_condition
        > by[(power.TEST_2X3, 0.8)].participants_per_condition
    )
    for a, b in zip(plain, clustered, strict=True):
        assert b.ratings_per_condition == pytest.approx(a.ratings_per_condition * 1.5, abs=2)
    one_comparison = by[(power.TEST_2X3, 0.8)]
    assert one_comparison.alpha_first_step == 0.05


def test_a_calibrated_judge_cuts_the_human_ratings_by_the_ppi_variance_factor():
    # PPI compares shares by a Wald test: the uncorrected test's ratings (no Yates), times the design effect and
    # the variance factor.
    shares = {"human": HUMAN, "gpt4": GPT4}
    for deff in (1.0, 1.8):
        lines = power.power_plan(
            baseline="human", shares=shares, judge_correlation=0.6, judge_ratio=4, design_effect=deff
        )
        for line in lines:
            expected = line.ratings_uncorrected * (1 - 0.36 * 4 / 5)
            assert line.ppi_ratings_per_condition == pytest.approx(expected, abs=1.5)
    per_value = power.power_plan(
        baseline="human", shares=shares, judge_correlation={0: 0.2, 1: 0.5, 2: 0.9}, judge_ratio=None
    )
    yates = next(line for line in per_value if line.test == power.TEST_2X2_YATES)
    chi = next(line for line in per_value if line.test == power.TEST_2X3)
    assert yates.ppi_ratings_per_condition == pytest.approx(yates.ratings_uncorrected * (1 - 0.81), abs=1.5)
    assert chi.ppi_ratings_per_condition == pytest.approx(chi.ratings_per_condition * (1 - 0.04), abs=1.5)
    assert power.power_plan(baseline="human", shares=shares)[0].ppi_ratings_per_condition is None


def test_equal_shares_need_infinitely_many_participants():
    lines = power.power_plan(baseline="human", shares={"human": HUMAN, "same": HUMAN})
    assert all(line.participants_per_condition is None for line in lines)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"shares": {"human": (0.5, 0.6, 0.1), "x": GPT4}}, "sum to 1"),
        ({"shares": {"human": (-0.1, 0.6, 0.5), "x": GPT4}}, "non-negative"),
        ({"shares": {"x": GPT4, "y": HUMAN}}, "baseline"),
        ({"shares": {"human": HUMAN}}, "at least one condition"),
        ({"shares": {"human": HUMAN, "x": (0.5, 0.5)}}, "same scale"),
        ({"alpha": 1.5}, "α"),
        ({"powers": [1.2]}, "power"),
        ({"items_per_participant": 0}, "items"),
        ({"design_effect": 0.5}, "design effect"),
        ({"judge_correlation": 2.0}, "correlation"),
    ],
)
def test_bad_plans_are_refused_with_a_reason(kwargs, message):
    args = {"baseline": "human", "shares": {"human": HUMAN, "gpt4": GPT4}, **kwargs}
    with pytest.raises(power.PowerError, match=message):
        power.power_plan(**args)


def test_the_seed_shares_are_the_published_datasets():
    data = pd.read_csv(DATASET)
    for name, shares in power.SEED_SHARES.items():
        observed = data[f"rating_{name}"].value_counts(normalize=True).sort_index().to_numpy()
        assert observed == pytest.approx(shares, abs=5e-4)


def test_the_seed_iccs_are_the_published_datasets():
    data = pd.read_csv(DATASET)
    for name, icc in power.SEED_ICC.items():
        top = (data[f"rating_{name}"] == 3).to_numpy(float)
        assert icc_anova(top, data[f"annotator_{name}"]) == pytest.approx(icc, abs=5e-4)
