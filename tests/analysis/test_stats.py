"""Every statistic of the analysis, checked against an independent computation: hand formulas and scipy /
statsmodels / krippendorff called directly on small tables whose answers are known."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2 as chi2_dist
from scipy.stats import chi2_contingency
from statsmodels.miscmodels.ordinal_model import OrderedModel

from analysis import exclusions, stats
from analysis.services import AnalysisError, AnalysisOptions, study_analyze
from studies.models import Emotion, Valence

from .builders import Rated, build_rating_study, participants_from_counts

pytestmark = pytest.mark.django_db

NO_EXCLUSIONS = exclusions.ExclusionRules.none()
# Bad, Okay, Good counts (values 1, 2, 3)
HUMAN = {1: 30, 2: 50, 3: 20}
GPT4 = {1: 20, 2: 40, 3: 40}
MIXTRAL = {1: 25, 2: 50, 3: 25}


def _opts(**kw):
    return AnalysisOptions(rules=kw.pop("rules", NO_EXCLUSIONS), bootstrap_samples=kw.pop("b", 500), **kw)


def _known_study(slug="known", **kw):
    people = (
        participants_from_counts("human", HUMAN)
        + participants_from_counts("gpt4", GPT4)
        + participants_from_counts("mixtral", MIXTRAL)
    )
    return build_rating_study(
        slug=slug, conditions=["human", "gpt4", "mixtral"], participants=people, **kw
    ).study


def _hand_chi2(table):
    """Pearson's chi-square by the textbook formula, no library."""
    t = np.asarray(table, dtype=float)
    expected = np.outer(t.sum(axis=1), t.sum(axis=0)) / t.sum()
    return float(((t - expected) ** 2 / expected).sum())


def _hand_yates_2x2(a, b, c, d):
    n = a + b + c + d
    return n * max(0.0, abs(a * d - b * c) - n / 2) ** 2 / ((a + b) * (c + d) * (a + c) * (b + d))


def _hand_holm(p):
    p = np.asarray(p, dtype=float)
    order = np.argsort(p)
    m = len(p)
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, (m - rank) * p[i])
        adjusted[i] = min(1.0, running)
    return adjusted


def test_it_counts_participants_ratings_and_shares_per_condition():
    result = study_analyze(study=_known_study(), options=_opts())
    dist = result.distribution.set_index("condition")
    assert list(dist.index) == ["human", "gpt4", "mixtral"]
    assert dist.loc["human", ["participants", "ratings", "n_Bad", "n_Okay", "n_Good"]].tolist() == [
        10,
        100,
        30,
        50,
        20,
    ]
    assert dist.loc["gpt4", "pct_Good"] == pytest.approx(40.0)
    assert dist.loc["human", "mean"] == pytest.approx((30 * 1 + 50 * 2 + 20 * 3) / 100)
    change = result.change.set_index("condition")
    assert change.loc["gpt4", "change"] == pytest.approx((0.40 - 0.20) / 0.20)
    assert change.loc["mixtral", "change"] == pytest.approx((0.25 - 0.20) / 0.20)


def test_omnibus_chi_square_matches_the_textbook_formula_and_scipy():
    result = study_analyze(study=_known_study(), options=_opts())
    overall = result.tests[(result.tests["scope"] == "overall")].set_index("test")
    table = [[30, 50, 20], [20, 40, 40], [25, 50, 25]]
    omnibus = overall.loc[stats.TEST_OMNIBUS]
    hand = _hand_chi2(table)
    assert omnibus["chi2"] == pytest.approx(hand)
    assert omnibus["dof"] == 4
    assert omnibus["p"] == pytest.approx(chi2_dist.sf(hand, 4))
    assert omnibus["p"] == pytest.approx(chi2_contingency(np.array(table)).pvalue)
    # Cramér's V = sqrt(chi2 / (n (min(r, c) - 1)))
    assert omnibus["cramers_v"] == pytest.approx(math.sqrt(hand / (300 * 2)))


def test_pairwise_tests_against_the_baseline_2x3_and_yates_2x2():
    result = study_analyze(study=_known_study(), options=_opts())
    t = result.tests[(result.tests["scope"] == "overall") & (result.tests["comparison"] == "gpt4 vs human")]
    t = t.set_index("test")
    two_by_three = t.loc[stats.TEST_2XK]
    assert two_by_three["chi2"] == pytest.approx(_hand_chi2([[20, 40, 40], [30, 50, 20]]))
    assert two_by_three["dof"] == 2
    yates = t.loc[stats.TEST_2X2]
    # gpt4: 40 Good / 60 rest; human: 20 Good / 80 rest
    assert yates["chi2"] == pytest.approx(_hand_yates_2x2(40, 60, 20, 80))
    assert yates["p"] == pytest.approx(chi2_dist.sf(_hand_yates_2x2(40, 60, 20, 80), 1))
    assert yates["chi2"] < _hand_chi2([[40, 60], [20, 80]])  # the correction shrinks it
    assert yates["cramers_v"] == pytest.approx(math.sqrt(_hand_chi2([[40, 60], [20, 80]]) / 200))
    assert yates["top_share"] == pytest.approx(0.4) and yates["top_share_baseline"] == pytest.approx(0.2)


def test_holm_correction_is_applied_within_each_family():
    result = study_analyze(study=_known_study(), options=_opts())
    family = result.tests[(result.tests["scope"] == "overall") & (result.tests["test"] == stats.TEST_2X2)]
    assert len(family) == 2
    assert family["p_holm"].to_numpy() == pytest.approx(_hand_holm(family["p"].to_numpy()))
    assert (family["p_holm"] >= family["p"]).all()
    omnibus = result.tests[
        (result.tests["scope"] == "overall") & (result.tests["test"] == stats.TEST_OMNIBUS)
    ]
    assert omnibus["p_holm"].iloc[0] == pytest.approx(omnibus["p"].iloc[0])  # a family of one


def test_holm_matches_a_hand_computation_on_known_p_values():
    # p-values of a known family (Holm 1979 style): sorted 0.01, 0.02, 0.03, 0.04 → 0.04, 0.06, 0.06, 0.06
    assert _hand_holm([0.04, 0.01, 0.03, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    from statsmodels.stats.multitest import multipletests

    assert multipletests([0.04, 0.01, 0.03, 0.02], method="holm")[1] == pytest.approx(
        [0.06, 0.04, 0.06, 0.06]
    )


def test_tests_by_valence_and_per_emotion_use_only_that_groups_ratings():
    people = [
        Rated("human", [("joyful", 3, 4000)] * 2 + [("joyful", 1, 4000)] * 8 + [("sad", 2, 4000)] * 10),
        Rated("human", [("joyful", 2, 4000)] * 10 + [("sad", 1, 4000)] * 5 + [("sad", 3, 4000)] * 5),
        Rated(
            "gpt4",
            [("joyful", 3, 4000)] * 9
            + [("joyful", 2, 4000)]
            + [("sad", 3, 4000)] * 4
            + [("sad", 1, 4000)] * 6,
        ),
        Rated("gpt4", [("joyful", 3, 4000)] * 5 + [("joyful", 1, 4000)] * 5 + [("sad", 2, 4000)] * 10),
    ]
    study = build_rating_study(slug="valence", conditions=["human", "gpt4"], participants=people).study
    result = study_analyze(study=study, options=_opts())
    joyful = result.tests[
        (result.tests["scope"] == "emotion") & (result.tests["group"] == "joyful")
    ].set_index("test")
    # joyful: human Bad 8 Okay 10 Good 2; gpt4 Bad 5 Okay 1 Good 14
    assert joyful.loc[stats.TEST_OMNIBUS, "chi2"] == pytest.approx(_hand_chi2([[8, 10, 2], [5, 1, 14]]))
    assert joyful.loc[stats.TEST_2X2, "chi2"] == pytest.approx(_hand_yates_2x2(14, 6, 2, 18))
    positive = result.tests[(result.tests["scope"] == "valence") & (result.tests["group"] == "positive")]
    assert positive.set_index("test").loc[stats.TEST_OMNIBUS, "n"] == 40
    per_emotion = result.tests[
        (result.tests["scope"] == "emotion") & (result.tests["test"] == stats.TEST_2X2)
    ]
    assert per_emotion["p_holm"].to_numpy() == pytest.approx(_hand_holm(per_emotion["p"].to_numpy()))
    by_emotion = result.change_by_emotion.set_index("emotion")
    assert by_emotion.loc["joyful", "change"] == pytest.approx((14 / 20 - 2 / 20) / (2 / 20))


def test_valence_is_read_from_the_emotion_table_at_analysis_time():
    study = _known_study()  # every rating is about "sad"
    first = study_analyze(study=study, options=_opts())
    assert set(first.distribution_by_valence["valence"]) == {Valence.NEGATIVE}
    Emotion.objects.filter(name="sad").update(valence=Valence.NEUTRAL)
    again = study_analyze(study=study, options=_opts())
    assert set(again.distribution_by_valence["valence"]) == {Valence.NEUTRAL}


def test_the_ordinal_model_matches_statsmodels_called_directly():
    result = study_analyze(study=_known_study(), options=_opts(ordinal_with_emotion=False))
    assert result.ordinal.converged
    values = [1] * 30 + [2] * 50 + [3] * 20 + [1] * 20 + [2] * 40 + [3] * 40 + [1] * 25 + [2] * 50 + [3] * 25
    gpt4 = [0.0] * 100 + [1.0] * 100 + [0.0] * 100
    mixtral = [0.0] * 200 + [1.0] * 100
    endog = pd.Series(pd.Categorical(values, categories=[1, 2, 3], ordered=True))
    exog = pd.DataFrame({"gpt4": gpt4, "mixtral": mixtral})
    direct = OrderedModel(endog, exog, distr="logit").fit(method="bfgs", disp=False, maxiter=1000)
    coef = result.ordinal.coefficients.set_index("term")
    assert coef.loc["condition_gpt4", "log_odds"] == pytest.approx(direct.params["gpt4"], abs=1e-4)
    assert coef.loc["condition_mixtral", "log_odds"] == pytest.approx(direct.params["mixtral"], abs=1e-4)
    assert coef.loc["condition_gpt4", "odds_ratio"] > 1  # gpt4 rated higher than human


def test_the_ordinal_model_with_emotion_falls_back_clearly_when_emotion_cannot_enter():
    result = study_analyze(study=_known_study(), options=_opts(ordinal_with_emotion=True))
    # every rating is about one emotion: the covariate cannot enter; the condition-only model is reported
    assert result.ordinal.formula == "rating ~ condition"
    assert result.ordinal.converged
    assert "one emotion only" in result.ordinal.note


def test_bootstrap_resamples_participants_reproducibly_and_agrees_with_a_naive_loop():
    study = _known_study()
    a = study_analyze(study=study, options=_opts(b=2000, seed=11))
    b = study_analyze(study=study, options=_opts(b=2000, seed=11))
    pd.testing.assert_frame_equal(a.bootstrap_shares, b.bootstrap_shares)
    shares = a.bootstrap_shares.set_index(["condition", "value"])
    gpt4_good = shares.loc[("gpt4", "Good")]
    assert gpt4_good["share"] == pytest.approx(0.4)
    assert gpt4_good["ci_low"] < 0.4 < gpt4_good["ci_high"]
    # Independent: resample participants one by one with a plain loop and compare the percentile interval.
    people = participants_from_counts("gpt4", GPT4)
    per_person = np.array([[sum(1 for _, v, _ in p.items if v == k) for k in (1, 2, 3)] for p in people])
    rng = np.random.default_rng(123)
    reps = []
    for _ in range(4000):
        pick = per_person[rng.integers(0, len(per_person), len(per_person))].sum(axis=0)
        reps.append(pick[2] / pick.sum())
    low, high = np.quantile(reps, [0.025, 0.975])
    assert gpt4_good["ci_low"] == pytest.approx(low, abs=0.02)
    assert gpt4_good["ci_high"] == pytest.approx(high, abs=0.02)
    change = a.bootstrap_change.set_index("condition").loc["gpt4"]
    assert change["change"] == pytest.approx(1.0)
    assert change["ci_low"] < 1.0 < change["ci_high"]


def test_agreement_is_not_applicable_with_one_rating_per_response():
    result = study_analyze(study=_known_study(), options=_opts())
    assert not result.agreement.applicable
    assert result.agreement.note == "not applicable: one rating per response"


def test_krippendorff_alpha_matches_the_package_on_a_reliability_matrix():
    # Three raters on the same 6 responses (a response rated by several participants).
    matrix = np.array([[3, 3, 2, 1, 2, 3], [3, 2, 2, 1, 1, 3], [3, 3, 1, 1, 2, 2]], dtype=float)
    rows = pd.DataFrame(
        [
            {"response_id": unit, "value": int(matrix[r, unit]), "participant_id": r}
            for r in range(3)
            for unit in range(6)
        ]
    )
    import krippendorff

    expected = krippendorff.alpha(
        reliability_data=matrix, level_of_measurement="ordinal", value_domain=[1, 2, 3]
    )
    got = stats.agreement(rows, stats.Scale(values=(1, 2, 3), labels=("Bad", "Okay", "Good")))
    assert got.applicable and got.units == 6 and got.pairable_ratings == 18
    assert got.alpha == pytest.approx(expected)
    nominal = krippendorff.alpha(
        reliability_data=matrix, level_of_measurement="nominal", value_domain=[1, 2, 3]
    )
    assert got.alpha_nominal == pytest.approx(nominal) and got.alpha_nominal != pytest.approx(expected)
    perfect = rows.assign(value=rows["response_id"] % 3 + 1)
    assert stats.agreement(perfect, stats.Scale((1, 2, 3), ("Bad", "Okay", "Good"))).alpha == pytest.approx(
        1.0
    )


def test_exclusion_rules_report_counts_before_and_after_and_match_the_export_rule():
    people = (
        participants_from_counts("human", HUMAN)
        + participants_from_counts("gpt4", GPT4)
        + [
            # Straight-liner whose wrong attention-check answer corroborates the identical answers.
            Rated("gpt4", [("sad", 3, 4000)] * 10, attention_failures=1),
            Rated("gpt4", [("sad", 3, 4000)] * 10),  # identical answers, taken slowly: sincere, kept
            Rated(
                "gpt4", [("sad", 3, 300), ("sad", 1, 400), ("sad", 2, 500)] + [("sad", 2, 700)] * 7
            ),  # too fast
            Rated("human", [("sad", 1, 4000), ("sad", 2, 4000)] * 5, flagged=True),  # failed attention checks
            Rated("human", [("sad", 3, 100)] * 10, flagged=True),  # all three rules (fast corroborates)
            Rated("human", [("sad", 2, 4000), ("sad", 1, 4000)] * 5, status="timed_out"),  # incomplete
        ]
    )
    study = build_rating_study(slug="excl", conditions=["human", "gpt4"], participants=people).study
    rules = exclusions.ExclusionRules(
        attention_checks=True, incomplete=True, min_median_response_ms=1000, straight_lining_min_items=10
    )
    result = study_analyze(study=study, options=_opts(rules=rules))
    summary = result.exclusions.set_index("rule")
    assert summary.loc["before exclusions", ["participants", "ratings"]].tolist() == [26, 260]
    assert summary.loc["attention_checks", "participants"] == 2
    assert summary.loc["incomplete", "participants"] == 1
    assert summary.loc["too_fast", "participants"] == 2
    assert summary.loc["straight_lining", "participants"] == 2
    assert summary.loc["after exclusions", ["participants", "ratings"]].tolist() == [21, 210]
    assert summary.loc["any rule", ["participants_human", "participants_gpt4"]].tolist() == [3, 2]
    assert result.distribution.set_index("condition").loc["gpt4", "n_Good"] == 50
    # The streamed export applies the same rules one participant at a time: both must agree.
    from kinds.rating.frame import rating_rows_frame

    rows = rating_rows_frame(study=study)
    for variant in (rules, dataclasses.replace(rules, straight_lining_identical_alone=True)):
        flags = exclusions.participant_exclusion_flags(rows, variant)
        for pid, sub in rows.groupby("participant_id"):
            one = exclusions.participant_exclusion_flags_one(
                values=sub["value"].tolist(),
                times_ms=[None if math.isnan(t) else t for t in sub["response_time_ms"]],
                flagged=bool(sub["flagged_for_exclusion"].iloc[0]),
                status=sub["participant_status"].iloc[0],
                attention_failures=int(sub["attention_failures"].iloc[0]),
                rules=variant,
            )
            assert one == {k: bool(flags.loc[pid, k]) for k in one}
    off = study_analyze(study=study, options=_opts(rules=NO_EXCLUSIONS))
    assert off.exclusions.set_index("rule").loc["after exclusions", "participants"] == 26


def test_previews_and_attention_check_pages_never_count(django_assert_max_num_queries):
    people = participants_from_counts("human", HUMAN) + participants_from_counts("gpt4", GPT4)
    people[0].extra_attention_value = 3
    people.append(Rated("gpt4", [("sad", 3, 4000)] * 10, preview=True))
    study = build_rating_study(slug="preview", conditions=["human", "gpt4"], participants=people).study
    from kinds.rating.frame import rating_rows_frame

    with django_assert_max_num_queries(1):
        rows = rating_rows_frame(study=study)
    assert len(rows) == 200
    result = study_analyze(study=study, options=_opts())
    assert result.distribution.set_index("condition").loc["gpt4", "n_Good"] == 40


def test_baseline_defaults_to_the_marked_condition_and_refuses_an_unknown_one():
    study = _known_study(slug="marked", baseline="mixtral")
    result = study_analyze(study=study, options=_opts())
    assert result.baseline == "mixtral"
    assert study_analyze(study=study, options=_opts(baseline="human")).baseline == "human"
    with pytest.raises(AnalysisError, match="not a condition"):
        study_analyze(study=study, options=_opts(baseline="gpt5"))


def test_a_study_without_ratings_gives_an_empty_analysis():
    study = build_rating_study(slug="empty", conditions=["human", "gpt4"], participants=[]).study
    result = study_analyze(study=study, options=_opts())
    assert result.empty and result.notes == ["no ratings to analyse yet"]
    assert result.summary()["tests"] == []


def test_chi_square_refuses_degenerate_tables():
    r = stats.chi_square(np.array([[5, 0, 0], [7, 0, 0]]), yates=False)
    assert math.isnan(r.p) and "not testable" in r.note


def test_the_ordinal_model_with_emotion_matches_statsmodels_on_the_raw_ratings(rated_study):
    """The model is fitted on (condition, emotion, value) cells weighted by their counts; statsmodels on the raw
    ratings, one row each, must give the same estimates and standard errors."""
    result = study_analyze(study=rated_study, options=_opts())
    assert result.ordinal.formula == "rating ~ condition + emotion" and result.ordinal.converged
    from kinds.rating.frame import rating_rows_frame

    rows = rating_rows_frame(study=rated_study)
    endog = pd.Series(pd.Categorical(rows["value"], categories=[1, 2, 3], ordered=True))
    exog = pd.DataFrame(
        {"gpt4": (rows["condition"] == "gpt4").astype(float), "sad": (rows["emotion"] == "sad").astype(float)}
    )
    direct = OrderedModel(endog, exog, distr="logit").fit(method="bfgs", disp=False, maxiter=1000)
    coef = result.ordinal.coefficients.set_index("term").loc["condition_gpt4"]
    assert coef["log_odds"] == pytest.approx(direct.params["gpt4"], abs=1e-4)
    assert coef["se"] == pytest.approx(direct.bse["gpt4"], rel=1e-3)
    assert coef["p"] == pytest.approx(direct.pvalues["gpt4"], rel=1e-2)
