"""Inference for clustered ratings (analysis.clustered) and the judge checks built on it, against statsmodels and
against the defects they replaced: a judge erring identically everywhere is not biased, a lenient one is caught,
the combined alt-test does not hang on a seed, the drift test pairs the same responses."""

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from statsmodels.stats.multitest import multipletests

from analysis import alt_test, calibration, clustered, ppi, stats

HUMAN = np.array([0.171, 0.336, 0.493])
GPT4 = np.array([0.071, 0.2815, 0.6475])


def clustered_sample(rng, people, items, p, icc):
    """Beta-binomial ratings: each participant's own top probability ~ Beta with mean p and ICC `icc`."""
    if icc == 0:
        own = np.full(people, p)
    else:
        k = (1 - icc) / icc
        own = rng.beta(p * k, (1 - p) * k, people)
    y = (rng.random((people, items)) < own[:, None]).astype(float).ravel()
    return y, np.repeat(np.arange(people), items)


def test_the_clustered_difference_is_gee_with_robust_errors_and_the_small_sample_factor():
    rng = np.random.default_rng(3)
    y_a, c_a = clustered_sample(rng, 60, 10, 0.6, 0.1)
    y_b, c_b = clustered_sample(rng, 60, 10, 0.5, 0.1)
    mine = clustered.clustered_difference(y_a, c_a, y_b, c_b)
    y = np.r_[y_a, y_b]
    x = sm.add_constant(np.r_[np.ones_like(y_a), np.zeros_like(y_b)])
    groups = np.r_[c_a, c_b + 1000]
    fit = sm.GEE(y, x, groups=groups, cov_struct=sm.cov_struct.Independence()).fit()
    assert mine.estimate == pytest.approx(fit.params[1])
    # statsmodels' robust covariance has no G/(G − 1); each side carries its own
    assert mine.se * np.sqrt(59 / 60) == pytest.approx(fit.bse[1], rel=1e-6)


def test_singletons_give_the_textbook_standard_error():
    y = np.array([1.0, 0, 0, 1, 1, 1, 0, 1])
    result = clustered.clustered_mean(y, np.arange(8))
    assert result.se == pytest.approx(y.std(ddof=1) / np.sqrt(8))


def test_the_icc_is_the_anova_estimator_and_recovers_a_known_one():
    rng = np.random.default_rng(5)
    y, c = clustered_sample(rng, 3000, 10, 0.5, 0.1)
    assert clustered.icc_anova(y, c) == pytest.approx(0.1, abs=0.01)
    assert clustered.icc_anova(*clustered_sample(rng, 3000, 10, 0.5, 0.0)) < 0.01
    assert np.isnan(clustered.icc_anova([1.0, 0.0], [1, 2]))  # no cluster of two
    assert clustered.design_effect(0.1, 10) == pytest.approx(1.9) and clustered.design_effect(np.nan, 10) == 1


def test_the_primary_test_keeps_its_level_where_the_papers_chi_square_does_not():
    rng = np.random.default_rng(11)
    new = old = 0
    reps = 300
    for _ in range(reps):
        a, ca = clustered_sample(rng, 100, 10, 0.5, 0.1)
        b, cb = clustered_sample(rng, 100, 10, 0.5, 0.1)
        new += clustered.clustered_difference(a, ca, b, cb).p < 0.05
        old += (
            stats.chi_square(
                np.array([[a.sum(), a.size - a.sum()], [b.sum(), b.size - b.sum()]]), yates=True
            ).p
            < 0.05
        )
    assert new / reps < 0.09 and old / reps > 0.10  # the naive test rejects ~16 % at ICC 0.1


def test_the_primary_line_is_in_the_tests_table_with_its_design_effect():
    rng = np.random.default_rng(2)
    frames = []
    for name, p in (("human", 0.5), ("gpt4", 0.65)):
        y, c = clustered_sample(rng, 50, 10, p, 0.1)
        frames.append(pd.DataFrame({"participant_id": [f"{name}{i}" for i in c], "condition": name,
                                    "value": np.where(y == 1, 3, 1), "emotion": "sad", "valence": "negative"}))  # fmt: skip
    rows = pd.concat(frames, ignore_index=True)
    scale = stats.Scale(values=(1, 2, 3), labels=("Bad", "Okay", "Good"))
    table = stats.tests_table(rows, scale, ["human", "gpt4"], "human")
    line = table[(table["test"] == stats.TEST_CLUSTERED) & (table["scope"] == "overall")].iloc[0]
    expected = clustered.clustered_difference(
        (frames[1]["value"] == 3).to_numpy(float), frames[1]["participant_id"],
        (frames[0]["value"] == 3).to_numpy(float), frames[0]["participant_id"],
    )  # fmt: skip
    assert line["p"] == pytest.approx(expected.p) and line["difference"] == pytest.approx(expected.estimate)
    assert line["design_effect"] > 1.3 and line["procedure"].startswith("primary")
    yates = table[(table["test"] == stats.TEST_2X2) & (table["scope"] == "overall")].iloc[0]
    assert yates["procedure"].startswith("seed study")


def _pairs(rng, matrices, n):
    frames = []
    for name, shares in (("human", HUMAN), ("gpt4", GPT4)):
        human = rng.choice(3, n, p=shares)
        cumulative = matrices[name].cumsum(axis=1)[human]
        judge = (rng.random(n)[:, None] > cumulative).sum(axis=1).clip(0, 2)
        frames.append(pd.DataFrame({"response_id": [f"{name}{i}" for i in range(n)], "condition": name,
                                    "human": human + 1, "judge": judge + 1}))  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def test_a_judge_with_the_same_errors_everywhere_is_not_reported_as_biased():
    # Defect 1: it keeps the human value with probability 0.7 in every condition; the gaps (judge − human) differ
    # between conditions only because people rated them differently.
    keep = np.full((3, 3), 0.15) + np.eye(3) * 0.55
    pairs = _pairs(np.random.default_rng(0), {"human": keep, "gpt4": keep}, 2000)
    gaps = (pairs["judge"] - pairs["human"]).groupby(pairs["condition"]).mean()
    assert abs(gaps["gpt4"] - gaps["human"]) > 0.08  # what the old check read as bias
    line = calibration.condition_check(pairs, [1, 2, 3], "human").set_index("condition").loc["gpt4"]
    assert line["p"] > 0.01 and abs(line["max_shift"]) < 0.1


def test_a_judge_lenient_to_one_condition_is_caught_with_its_direction():
    fair = np.array([[0.80, 0.15, 0.05], [0.10, 0.81, 0.09], [0.03, 0.12, 0.85]])
    lenient = np.array([[0.80, 0.15, 0.05], [0.10, 0.68, 0.22], [0.03, 0.12, 0.85]])
    pairs = _pairs(np.random.default_rng(1), {"human": fair, "gpt4": lenient}, 2000)
    line = calibration.condition_check(pairs, [1, 2, 3], "human").set_index("condition").loc["gpt4"]
    assert (
        line["p_holm"] < 0.001
        and line["shift_2"] == pytest.approx(0.13, abs=0.05)
        and line["max_shift"] > 0.1
    )


def test_the_vectorised_benjamini_yekutieli_is_statsmodels():
    rng = np.random.default_rng(4)
    p = rng.random((200, 5)) ** 3
    mine = alt_test._by_reject(p, 0.05)
    theirs = np.array([multipletests(row, alpha=0.05, method="fdr_by")[0] for row in p])
    assert (mine == theirs).all()


def test_the_combined_alt_test_hardly_depends_on_its_seed():
    rng = np.random.default_rng(7)
    per = rng.integers(3, 6, 400)
    response = np.repeat(np.arange(400), per)
    quality = rng.integers(1, 4, 400)
    value = np.where(rng.random(response.size) < 0.6, quality[response], rng.integers(1, 4, response.size))
    human = pd.DataFrame({"response_id": response, "rater": rng.permutation(np.arange(response.size) // 10),
                          "value": value})  # fmt: skip
    judge = pd.Series(np.where(rng.random(400) < 0.5, quality, rng.integers(1, 4, 400)), index=range(400))
    one = [
        alt_test.alternative_annotator_test(human, judge, seed=s, pairings=1).winning_rate for s in range(12)
    ]
    averaged = [alt_test.alternative_annotator_test(human, judge, seed=s).winning_rate for s in range(4)]
    assert max(one) - min(one) >= 0.2  # one pairing: ω hangs on the seed
    assert max(averaged) - min(averaged) < 0.05


def test_ppi_shares_of_a_condition_sum_to_one_and_cluster_by_rater():
    rng = np.random.default_rng(9)
    truth = rng.choice([1, 2, 3], 1000, p=[0.2, 0.3, 0.5])
    judge = np.where(rng.random(1000) < 0.8, truth, rng.integers(1, 4, 1000))
    human = pd.DataFrame({"response_id": range(300), "condition": "c", "value": truth[:300],
                          "rater": np.arange(300) // 10})  # fmt: skip
    judged = pd.DataFrame({"response_id": range(1000), "condition": "c", "value": judge})
    shares, _ = ppi.ppi_share_table(human=human, judge=judged, values=[1, 2, 3], baseline="c")
    assert shares["ppi_estimate"].sum() == pytest.approx(1.0, abs=1e-12)
    assert shares["ppi_lambda"].nunique() == 1
    good = shares.iloc[2]
    y = (human["value"] == 3).to_numpy(float)
    expected = ppi.ppi_mean(y, (judge[:300] == 3).astype(float), (judge[300:] == 3).astype(float),
                            lam=good["ppi_lambda"], clusters=human["rater"])  # fmt: skip
    assert good["ppi_se"] == pytest.approx(expected.se)
    plain = ppi.ppi_share_table(
        human=human.drop(columns="rater"), judge=judged, values=[1, 2, 3], baseline="c"
    )[0]
    assert plain.iloc[2]["ppi_se"] != pytest.approx(good["ppi_se"])


def test_the_paired_drift_difference_cancels_the_responses_and_clusters_two_ways():
    # Two responses, each rated once originally and twice on re-rating: θ = mean of the per-response differences
    # weighted by re-ratings.
    y = np.array([1.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    side = np.array([0, 0, 1, 1, 1, 1])
    response = np.array(["a", "b", "a", "a", "b", "b"])
    rater = np.array(["o1", "o2", "n1", "n2", "n1", "n2"])
    result = clustered.twoway_clustered_difference(y, side, response, rater)
    assert result.estimate == pytest.approx(0.5 * (1 - 1) + 0.5 * (0.5 - 0))
    with pytest.raises(ValueError, match="both sides"):
        clustered.twoway_clustered_difference(y, side, np.array(["a", "b", "c", "c", "d", "d"]), rater)
