"""Judge–human calibration (analysis.calibration, analysis.alt_test) on plain DataFrames with known answers."""

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.inter_rater import cohens_kappa
from statsmodels.stats.multitest import multipletests

from analysis import alt_test, calibration, power, stats

SCALE = [1, 2, 3]
EMOTIONS = [("sad", "negative"), ("joyful", "positive"), ("proud", "positive")]


def crowd(responses=240, raters_per_response=3, rater_pool=None, judge_agreement=0.85, seed=0):
    """Responses with a latent quality; people give it with probability 0.7, the judge with `judge_agreement`."""
    rng = np.random.default_rng(seed)
    quality = rng.integers(1, 4, responses)
    rows = []
    for i in range(responses):
        emotion, valence = EMOTIONS[i % 3]
        for k in range(raters_per_response):
            value = quality[i] if rng.random() < 0.7 else rng.integers(1, 4)
            rater = f"r{k}" if rater_pool is None else f"p{(i * raters_per_response + k) % rater_pool}"
            rows.append((i, rater, int(value), ["human", "gpt4"][i % 2], emotion, valence))
    human = pd.DataFrame(rows, columns=["response_id", "rater", "value", "condition", "emotion", "valence"])
    judged = np.where(rng.random(responses) < judge_agreement, quality, rng.integers(1, 4, responses))
    judge = pd.DataFrame({"response_id": range(responses), "value": judged.astype(int)})
    return human, judge


def test_the_bootstrap_alpha_formula_is_krippendorffs():
    rng = np.random.default_rng(1)
    for _ in range(5):
        counts = rng.integers(0, 4, size=(60, 3)).astype(float)
        counts[counts.sum(axis=1) < 2, 0] += 2
        mine = calibration.ordinal_alpha_from_coincidence(calibration._unit_coincidences(counts).sum(axis=0))
        theirs = krippendorff.alpha(
            value_counts=counts, value_domain=[0, 1, 2], level_of_measurement="ordinal"
        )
        assert mine == pytest.approx(theirs, abs=1e-10)


@pytest.mark.parametrize("wt", ["linear", "quadratic"])
def test_weighted_kappa_is_statsmodels(wt):
    table = np.array([[30, 8, 2], [6, 40, 9], [3, 7, 25]])
    assert calibration.weighted_kappa(table, wt) == pytest.approx(cohens_kappa(table, wt=wt).kappa, abs=1e-12)


def test_judge_human_agreement_is_the_two_rater_figures_with_bootstrap_cis():
    human, judge = crowd(raters_per_response=1)
    pairs = calibration.pairs_frame(human, judge)
    result = calibration.judge_human_agreement(pairs, SCALE, b=500, seed=3)
    expected_alpha = krippendorff.alpha(
        reliability_data=pairs[["human", "judge"]].to_numpy().T.astype(float), level_of_measurement="ordinal"
    )
    assert result.alpha.value == pytest.approx(expected_alpha)
    table = pd.crosstab(pairs["human"], pairs["judge"]).to_numpy()
    assert result.kappa_quadratic.value == pytest.approx(cohens_kappa(table, wt="quadratic").kappa)
    for c in (result.alpha, result.kappa_linear, result.kappa_quadratic):
        assert c.ci_low < c.value < c.ci_high
    again = calibration.judge_human_agreement(pairs, SCALE, b=500, seed=3)
    assert again.alpha == result.alpha


def test_human_human_alpha_is_the_studys_own_agreement_figure():
    human, _ = crowd()
    result = calibration.human_human_agreement(human, SCALE, b=200)
    own = stats.agreement(human, stats.Scale(values=(1, 2, 3), labels=("Bad", "Okay", "Good")))
    assert result.alpha.value == pytest.approx(own.alpha)
    assert result.units == 240 and result.ratings == 720
    single = calibration.human_human_agreement(human.drop_duplicates("response_id"), SCALE)
    assert single.alpha is None and "one human rating" in single.note


def reference_alt_test(human, judge, epsilon, q):
    """The procedure written out loop by loop (negative RMSE alignment), for raters as annotators."""
    p_values = []
    for rater, own in human.groupby("rater"):
        d = []
        for _, row in own.iterrows():
            others = human[(human["response_id"] == row["response_id"]) & (human["rater"] != rater)]["value"]
            s_f = -np.sqrt(np.mean((judge[row["response_id"]] - others) ** 2))
            s_h = -np.sqrt(np.mean((row["value"] - others) ** 2))
            d.append(float(s_h >= s_f) - float(s_f >= s_h))
        p_values.append(sps.ttest_1samp(d, epsilon, alternative="less").pvalue)
    reject = multipletests(p_values, alpha=q, method="fdr_by")[0]
    return p_values, reject.mean()


def test_the_alt_test_follows_the_procedure_step_by_step():
    human, judge = crowd(responses=60, raters_per_response=4, judge_agreement=0.6, seed=4)
    series = judge.set_index("response_id")["value"]
    result = alt_test.alternative_annotator_test(human, series, epsilon=0.1, min_instances=30)
    p_values, omega = reference_alt_test(human, series, 0.1, 0.05)
    assert result.applicable and result.annotators == "raters"
    assert result.per_annotator["p"].to_numpy() == pytest.approx(p_values)
    assert result.winning_rate == pytest.approx(omega)
    assert result.passed == (omega >= 0.5)


def test_a_judge_that_represents_people_passes_and_a_random_one_fails():
    human, judge = crowd(responses=200, raters_per_response=3, judge_agreement=1.0, seed=6)
    good = alt_test.alternative_annotator_test(human, judge.set_index("response_id")["value"])
    assert good.passed and good.winning_rate == 1.0 and good.advantage_probability > 0.8
    rng = np.random.default_rng(0)
    random = pd.Series(rng.integers(1, 4, 200), index=range(200))
    bad = alt_test.alternative_annotator_test(human, random)
    assert not bad.passed and bad.winning_rate == 0.0


def test_crowd_raters_with_few_responses_are_combined_into_annotators():
    human, judge = crowd(responses=200, raters_per_response=3, rater_pool=60, seed=2)  # 10 responses each
    result = alt_test.alternative_annotator_test(human, judge.set_index("response_id")["value"])
    assert result.applicable and result.annotators == "combined"
    assert list(result.per_annotator["annotator"]) == ["slot 1", "slot 2", "slot 3"]
    assert (result.per_annotator["responses"] == 200).all()


def test_the_alt_test_needs_three_ratings_per_response():
    human, judge = crowd(raters_per_response=2)
    result = alt_test.alternative_annotator_test(human, judge.set_index("response_id")["value"])
    assert not result.applicable and "3 or more" in result.note


def test_a_good_judge_may_screen_with_every_table_filled():
    human, judge = crowd(responses=240, judge_agreement=0.9, seed=8)
    words = pd.Series(np.random.default_rng(1).integers(10, 90, 240), index=range(240))
    result = calibration.calibrate(
        human=human, judge=judge, scale=SCALE, baseline="human", words=words, b=300
    )
    assert result.may_screen, result.reasons
    assert result.verdict.startswith("MAY SCREEN")
    assert result.judge_human.alpha.value >= result.human_human.alpha.value
    assert result.confusion.to_numpy().sum() == 720
    assert set(result.by_valence["valence"]) == {"negative", "positive"}
    assert set(result.by_emotion["emotion"]) == {"sad", "joyful", "proud"}
    assert result.by_emotion["pairs"].sum() == 720


def test_a_judge_that_likes_long_responses_may_not_screen():
    human, judge = crowd(responses=300, judge_agreement=0.9, seed=9)
    words = pd.Series(np.random.default_rng(2).integers(10, 90, 300), index=range(300))
    long = judge["response_id"].map(words) > 50
    judge.loc[long, "value"] = 3
    result = calibration.calibrate(human=human, judge=judge, scale=SCALE, words=words, b=200)
    assert result.length["judge_minus_human"].ci_low > 0.1
    assert not result.may_screen
    assert any("favours longer responses" in reason for reason in result.reasons)


def test_a_judge_that_favours_one_condition_may_not_screen():
    human, judge = crowd(responses=300, judge_agreement=0.9, seed=10)
    gpt4 = judge["response_id"] % 2 == 1
    judge.loc[gpt4, "value"] = np.minimum(judge.loc[gpt4, "value"] + 1, 3)
    result = calibration.calibrate(human=human, judge=judge, scale=SCALE, baseline="human", b=200)
    line = result.conditions.set_index("condition").loc["gpt4"]
    assert line["shift"] > 0.3 and line["p_holm"] < 0.05
    assert any("rates gpt4 more leniently" in reason for reason in result.reasons)


def test_too_few_responses_may_not_screen():
    human, judge = crowd(responses=30, judge_agreement=1.0)
    result = calibration.calibrate(human=human, judge=judge, scale=SCALE, b=100)
    assert not result.may_screen and "only 30 responses" in result.verdict


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda h, j: (h.drop(columns="rater"), j), "columns"),
        (lambda h, j: (h, pd.concat([j, j.head(1)])), "one judge rating per response"),
        (lambda h, j: (pd.concat([h, h.head(1)]), j), "twice"),
        (lambda h, j: (h, j.assign(value=j["value"] + 5)), "not on the scale"),
    ],
)
def test_bad_frames_are_refused_with_a_reason(mutate, message):
    human, judge = mutate(*crowd(responses=60))
    with pytest.raises(ValueError, match=message):
        calibration.calibrate(human=human, judge=judge, scale=SCALE, b=50)


def test_the_judges_indicator_correlations_feed_the_ppi_power_figures():
    human, judge = crowd(responses=240, judge_agreement=0.9, seed=8)
    result = calibration.calibrate(human=human, judge=judge, scale=SCALE, b=50)
    pairs = calibration.pairs_frame(human, judge)
    for v in SCALE:
        expected = np.corrcoef(pairs["human"] == v, pairs["judge"] == v)[0, 1]
        assert result.indicator_correlations[v] == pytest.approx(expected)
    rho = {i: result.indicator_correlations[v] for i, v in enumerate(SCALE)}
    lines = power.power_plan(
        baseline="human", shares={"human": (0.2, 0.3, 0.5), "gpt4": (0.1, 0.3, 0.6)}, judge_correlation=rho
    )
    yates = next(line for line in lines if line.test == power.TEST_2X2_YATES)
    assert yates.ppi_ratings_per_condition == pytest.approx(
        yates.ratings_uncorrected * (1 - rho[2] ** 2), abs=1
    )
