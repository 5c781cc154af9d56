"""The pairwise statistics (analysis/bradley_terry.py) against independent references, and the files the pairwise
analysis writes (analysis/pairwise_report.py)."""

import io
import json
import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from django.core.management import CommandError, call_command
from scipy.optimize import minimize
from statsmodels.stats.power import NormalIndPower

from kinds.pairwise import bradley_terry as bt
from kinds.pairwise.report import pairwise_analyze_frame, pairwise_outputs_write
from studies.kinds import StudyKind, register, unregister
from tests.factories import ConditionFactory, StudyFactory

CONDITIONS = ["human", "gpt4", "llama", "mixtral"]
THETA = {"human": 0.0, "gpt4": 0.5, "llama": 0.2, "mixtral": -0.3}


def simulate(
    seed=0, n=1500, nu=0.6, side=0.0, length_effect=0.0, raters=150, prompts=30, conditions=CONDITIONS
):
    """Davidson votes from THETA, pairs and sides at random; lengths random, `length_effect` per doubling."""
    rng = np.random.default_rng(seed)
    k = len(conditions)
    first = rng.integers(0, k, n)
    second = (first + rng.integers(1, k, n)) % k
    lengths = rng.integers(40, 400, (n, 2))
    theta = np.array([THETA[c] for c in conditions])
    d = theta[first] - theta[second] + side + length_effect * np.log2(lengths[:, 0] / lengths[:, 1])
    root = np.exp(d / 2)
    p = np.column_stack([root, 1 / root, np.full(n, nu)])
    p /= p.sum(axis=1, keepdims=True)
    outcome = (rng.random(n)[:, None] > p.cumsum(axis=1)).sum(axis=1).clip(0, 2)
    return pd.DataFrame(
        {
            "participant": [f"p{i % raters}" for i in range(n)],
            "prompt_id": [f"q{i % prompts}" for i in range(n)],
            "left_condition": np.array(conditions)[first],
            "right_condition": np.array(conditions)[second],
            "choice": np.array(bt.CHOICES)[outcome],
            "both_inadequate": rng.random(n) < 0.1,
            "response_time_ms": rng.integers(2000, 20000, n),
            "left_length": lengths[:, 0],
            "right_length": lengths[:, 1],
            "position": np.arange(n) % 10,
        }
    )


def logit_reference(frame, covariates=()):
    """statsmodels Logit on the ±1 design of the non-tied votes (plain Bradley–Terry), the baseline dropped."""
    names = sorted(set(frame["left_condition"]) | set(frame["right_condition"]))
    x = np.column_stack(
        [
            (frame["left_condition"] == c).astype(float) - (frame["right_condition"] == c).astype(float)
            for c in names
        ]
    )
    keep = [i for i, c in enumerate(names) if c != "human"]
    columns = [x[:, keep]]
    if "position" in covariates:
        columns.append(np.ones((len(frame), 1)))
    if "length" in covariates:
        columns.append(np.log2(frame["left_length"] / frame["right_length"]).to_numpy()[:, None])
    result = sm.Logit((frame["choice"] == "left").astype(float).to_numpy(), np.hstack(columns)).fit(disp=0)
    return [names[i] for i in keep], result


def test_without_ties_the_davidson_fit_is_plain_bradley_terry_as_statsmodels_logit_fits_it():
    frame = simulate(nu=0.6)
    frame = frame[frame["choice"] != "tie"]
    names, reference = logit_reference(frame)
    fit = bt.davidson_fit(frame, baseline="human")
    assert fit.tie == 0.0 and fit.strengths["human"] == 0.0
    assert [fit.strengths[c] for c in names] == pytest.approx(reference.params, abs=1e-7)
    assert [fit.strength_se()[c] for c in names] == pytest.approx(reference.bse, rel=1e-6)
    assert fit.log_likelihood == pytest.approx(reference.llf, abs=1e-6)


@pytest.mark.parametrize("covariates", [("position",), ("length",), ("position", "length")])
def test_the_covariates_match_logit_with_the_same_columns(covariates):
    frame = simulate(seed=3, side=0.3, length_effect=0.4)
    frame = frame[frame["choice"] != "tie"]
    names, reference = logit_reference(frame, covariates)
    fit = bt.davidson_fit(frame, baseline="human", covariates=covariates)
    got = [fit.strengths[c] for c in names] + [fit.coefficients[c] for c in covariates]
    assert got == pytest.approx(reference.params, abs=1e-7)


def test_with_ties_it_maximises_the_davidson_likelihood_in_its_textbook_form():
    """An independent check: Davidson's P(i beats j) = π_i / (π_i + π_j + ν√(π_i π_j)) maximised by Nelder–Mead."""
    frame = simulate(seed=1, n=800, nu=0.7)
    fit = bt.davidson_fit(frame, baseline="human")
    names = sorted(CONDITIONS)
    left = frame["left_condition"].map(names.index).to_numpy()
    right = frame["right_condition"].map(names.index).to_numpy()
    choice = frame["choice"].to_numpy()

    def negative_log_likelihood(x):
        pi = np.exp(np.insert(x[:3], names.index("human"), 0.0))
        nu = np.exp(x[3])
        pl, pr = pi[left], pi[right]
        denominator = pl + pr + nu * np.sqrt(pl * pr)
        numerator = np.where(choice == "left", pl, np.where(choice == "right", pr, nu * np.sqrt(pl * pr)))
        return -np.log(numerator / denominator).sum()

    reference = minimize(negative_log_likelihood, np.zeros(4), method="Nelder-Mead",
                         options={"xatol": 1e-9, "fatol": 1e-11, "maxiter": 20000, "maxfev": 40000})  # fmt: skip
    free = [c for c in names if c != "human"]
    assert [fit.strengths[c] for c in free] == pytest.approx(reference.x[:3], abs=1e-4)
    assert fit.tie == pytest.approx(math.exp(reference.x[3]), rel=1e-4)
    assert fit.log_likelihood == pytest.approx(-reference.fun, abs=1e-6)


def test_it_recovers_known_strengths_and_the_tie_parameter():
    fit = bt.davidson_fit(simulate(seed=7, n=20000, nu=0.5), baseline="human")
    for name, value in THETA.items():
        assert fit.strengths[name] == pytest.approx(value, abs=0.06)
    assert fit.tie == pytest.approx(0.5, abs=0.04)


def test_a_condition_without_votes_is_refused_by_name():
    frame = simulate(n=300, conditions=["human", "gpt4", "llama"])
    with pytest.raises(bt.BradleyTerryError, match=r"no votes compare \['mixtral'\]"):
        bt.davidson_fit(frame, baseline="human", conditions=CONDITIONS)


def test_conditions_never_compared_with_each_other_are_refused():
    a = simulate(seed=1, n=200, conditions=["human", "gpt4"])
    b = simulate(seed=2, n=200, conditions=["llama", "mixtral"])
    with pytest.raises(bt.BradleyTerryError, match="2 groups never compared"):
        bt.davidson_fit(pd.concat([a, b]), baseline="human")


def test_a_condition_that_never_won_or_tied_has_an_unbounded_strength_and_is_refused():
    frame = simulate(n=400)
    loser = frame["left_condition"].eq("mixtral") | frame["right_condition"].eq("mixtral")
    frame.loc[loser, "choice"] = np.where(frame.loc[loser, "left_condition"] == "mixtral", "right", "left")
    with pytest.raises(bt.BradleyTerryError, match=r"\['mixtral'\] never won or tied"):
        bt.davidson_fit(frame, baseline="human")


def test_bad_input_gets_a_clear_error():
    frame = simulate(n=50)
    with pytest.raises(bt.BradleyTerryError, match="lacks the columns"):
        pairwise_analyze_frame(frame.drop(columns=["prompt_id"]), baseline="human")
    with pytest.raises(bt.BradleyTerryError, match="choice must be one of"):
        bt.davidson_fit(frame.assign(choice="A"), baseline="human")
    with pytest.raises(bt.BradleyTerryError, match="not one of the conditions"):
        bt.davidson_fit(frame, baseline="nobody")
    with pytest.raises(bt.BradleyTerryError, match="every vote is a tie"):
        bt.davidson_fit(frame.assign(choice="tie"), baseline="human")
    with pytest.raises(bt.BradleyTerryError, match="no answered pairs"):
        pairwise_analyze_frame(frame.iloc[0:0], baseline="human")
    with pytest.raises(bt.BradleyTerryError, match="compare a condition with itself"):
        bt.davidson_fit(frame.assign(right_condition=frame["left_condition"]), baseline="human")


def test_the_bootstrap_is_seeded_and_resamples_raters_and_prompts():
    frame = simulate(n=600)
    votes = bt.votes_from_frame(frame)
    fit = bt.davidson_fit(votes, baseline="human")
    one = bt.twoway_bootstrap(votes, fit, n_boot=40, seed=5)
    two = bt.twoway_bootstrap(votes, fit, n_boot=40, seed=5)
    other = bt.twoway_bootstrap(votes, fit, n_boot=40, seed=6)
    for unit in bt.BOOTSTRAP_UNITS:
        np.testing.assert_array_equal(one.replicates[unit], two.replicates[unit])
    assert one.ci_low == two.ci_low and one.ci_low != other.ci_low
    # A rater replicate gives all of a rater's votes the same weight, a prompt replicate all of a prompt's.
    rng = np.random.default_rng(0)
    weights = bt.bootstrap_weights(votes, "rater", rng, 3)
    for b in range(3):
        assert all(len(set(weights[b][votes.rater == r])) == 1 for r in range(5))
    weights = bt.bootstrap_weights(votes, "prompt", rng, 3)
    assert all(len(set(weights[0][votes.prompt == q])) == 1 for q in range(5))
    assert one.ci_low["human"] == one.ci_high["human"] == 0.0
    for name in ("gpt4", "llama", "mixtral"):
        assert one.ci_low[name] < fit.strengths[name] < one.ci_high[name]


def test_raters_who_agree_with_themselves_widen_the_interval():
    """Each rater answers every vote the same way as their own coin says: rater clustering the vote bootstrap
    misses and the two-way one sees."""
    frame = simulate(seed=4, n=1200, raters=40)
    rng = np.random.default_rng(1)
    taste = dict(zip([f"p{i}" for i in range(40)], rng.random(40) < 0.5, strict=True))
    gpt4_left = frame["left_condition"].eq("gpt4") & frame["right_condition"].eq("human")
    gpt4_right = frame["right_condition"].eq("gpt4") & frame["left_condition"].eq("human")
    likes = frame["participant"].map(taste)
    frame.loc[gpt4_left, "choice"] = np.where(likes[gpt4_left], "left", "right")
    frame.loc[gpt4_right, "choice"] = np.where(likes[gpt4_right], "right", "left")
    votes = bt.votes_from_frame(frame)
    boot = bt.twoway_bootstrap(votes, bt.davidson_fit(votes, baseline="human"), n_boot=100, seed=0)
    assert boot.variances["rater"]["gpt4"] > 2 * boot.variances["vote"]["gpt4"]
    assert boot.se["gpt4"] ** 2 > 1.5 * boot.variances["vote"]["gpt4"]


def test_win_matrix_win_rates_and_position_count_ties_apart():
    frame = pd.DataFrame(
        {
            "participant": ["a", "a", "b", "b", "c", "c"],
            "prompt_id": ["1", "2", "1", "2", "1", "2"],
            "left_condition": ["gpt4", "human", "human", "gpt4", "gpt4", "human"],
            "right_condition": ["human", "gpt4", "gpt4", "human", "human", "gpt4"],
            "choice": ["left", "right", "tie", "right", "left", "left"],
        }
    )
    matrix = bt.win_matrix(frame).set_index(["condition", "opponent"])
    assert matrix.loc[("gpt4", "human"), ["wins", "losses", "ties", "votes"]].tolist() == [3, 2, 1, 6]
    assert matrix.loc[("human", "gpt4"), ["wins", "losses", "ties"]].tolist() == [2, 3, 1]
    rates = bt.win_rates(frame, baseline="human").iloc[0]
    assert (rates["wins"], rates["losses"], rates["ties"], rates["win_rate"]) == (3, 2, 1, 0.6)
    position = bt.position_bias(frame)
    assert (position["left_wins"], position["right_wins"], position["ties"]) == (3, 2, 1)
    assert position["left_share"] == 0.6


def test_agreement_reads_votes_by_condition_not_by_side():
    frame = pd.DataFrame(
        {
            "prompt_id": ["1", "1", "2", "2", "3"],
            "left_condition": ["gpt4", "human", "gpt4", "human", "gpt4"],
            "right_condition": ["human", "gpt4", "human", "gpt4", "human"],
            "choice": [
                "left",
                "right",
                "left",
                "left",
                "tie",
            ],  # prompt 1: both prefer gpt4; 2: they disagree
            "both_inadequate": [False, False, True, True, False],
        }
    )
    result = bt.agreement(frame)
    assert result["units_repeated"] == 2 and result["votes_on_repeated_units"] == 4
    assert result["choice_percent_agreement"] == 0.5
    assert result["both_inadequate_percent_agreement"] == 1.0
    # By hand from the coincidence matrix: observed and expected disagreement are both 1/2 for the choices.
    assert result["choice_alpha"] == pytest.approx(0.0, abs=1e-12)
    assert result["both_inadequate_alpha"] == pytest.approx(1.0)
    # The flag read back from a CSV is text: the same answer.
    as_text = frame.assign(both_inadequate=frame["both_inadequate"].map({True: "True", False: "False"}))
    assert bt.agreement(as_text) == result


def test_seventy_eight_five_non_tied_votes_tell_fifty_five_percent_from_a_coin():
    needed = bt.win_rate_votes_needed(0.55, alpha=0.05, power=0.8)
    assert math.ceil(needed) == 785
    reference = NormalIndPower().solve_power(effect_size=0.1, nobs1=None, alpha=0.05, power=0.8, ratio=0)
    assert needed == pytest.approx(reference, rel=1e-3)
    assert bt.pairs_needed(0.55, tie_rate=0.25) == pytest.approx(needed / 0.75)
    # The planned test (a share against 0.5) at 785 votes rejects about 80 % of the time when the rate is 55 %.
    wins = np.random.default_rng(0).binomial(785, 0.55, 20000)
    z = (wins / 785 - 0.5) / math.sqrt(0.25 / 785)
    assert np.mean(np.abs(z) > 1.959964) == pytest.approx(0.8, abs=0.015)
    assert bt.win_rate_votes_needed(0.5) == math.inf
    with pytest.raises(bt.BradleyTerryError):
        bt.pairs_needed(0.55, tie_rate=1.0)


def test_adaptive_weights_are_uniform_before_the_warmup_then_favour_overlapping_pairs_under_the_cap():
    frame = simulate(n=1200, conditions=["human", "gpt4", "mixtral"])
    names = ["human", "gpt4", "mixtral"]
    early = bt.adaptive_pair_weights(frame.head(50), names, warmup=100, cap=0.5)
    assert early == {pair: pytest.approx(1 / 3) for pair in [("human", "gpt4"), ("human", "mixtral"),
                                                              ("gpt4", "mixtral")]}  # fmt: skip
    late = bt.adaptive_pair_weights(frame, names, warmup=100, cap=0.5)
    assert sum(late.values()) == pytest.approx(1.0)
    assert max(late.values()) <= 0.5 + 1e-12
    # gpt4 (0.5) and mixtral (−0.3) are far apart: their pair is the least needed.
    assert late[("gpt4", "mixtral")] == min(late.values())
    capped = bt.adaptive_pair_weights(frame, names, warmup=100, cap=0.34)
    assert max(capped.values()) <= 0.34 + 1e-12 and sum(capped.values()) == pytest.approx(1.0)
    assert bt.adaptive_pair_weights(frame.iloc[0:0], names, warmup=0, cap=0.5) == early
    with pytest.raises(bt.BradleyTerryError, match="cap must be"):
        bt.adaptive_pair_weights(frame, names, warmup=0, cap=0.2)


def test_adaptive_weights_exist_when_a_condition_never_won():
    frame = simulate(n=200, conditions=["human", "gpt4", "mixtral"])
    frame = frame[~(frame["left_condition"].eq("mixtral") & frame["choice"].eq("left"))]
    frame = frame[~(frame["right_condition"].eq("mixtral") & frame["choice"].eq("right"))]
    weights = bt.adaptive_pair_weights(frame, ["human", "gpt4", "mixtral"], warmup=10, cap=0.6)
    assert sum(weights.values()) == pytest.approx(1.0) and all(w >= 0 for w in weights.values())


def test_the_analysis_writes_its_tables_figures_and_report(tmp_path):
    frame = simulate(seed=2, n=900, side=0.2, length_effect=0.3)
    result = pairwise_analyze_frame(frame, baseline="human", seed=1, n_boot=30)
    paths = pairwise_outputs_write(result, tmp_path)
    names = {p.name for p in paths}
    assert {"bt_scores.csv", "win_matrix.csv", "win_rates.csv", "position_bias.csv", "report.html",
            "bt_strengths.png", "win_matrix.png", "summary.json"} <= names  # fmt: skip
    scores = pd.read_csv(tmp_path / "bt_scores.csv")
    assert list(scores.columns[:4]) == ["condition", "strength", "ci_low", "ci_high"]
    assert {"strength_lc", "ci_low_lc", "ci_high_lc"} <= set(scores.columns)
    human = scores.set_index("condition").loc["human"]
    assert (human["strength"], human["ci_low"], human["ci_high"]) == (0.0, 0.0, 0.0)
    assert set(scores["condition"]) == set(CONDITIONS)
    assert list(pd.read_csv(tmp_path / "win_rates.csv")["condition"]) == ["gpt4", "llama", "mixtral"]
    assert pd.read_csv(tmp_path / "position_bias.csv")["measure"].tolist() == [
        "left_share_of_non_tied_votes",
        "left_side_advantage_log_odds",
    ]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["votes"] == 900 and summary["baseline"] == "human"
    html = (tmp_path / "report.html").read_text()
    assert html.count('<img src="data:image/png;base64,') == 2 and 'alt="Log-strengths' in html
    # Reproducible: the same frame, seed and replicates give the same bytes.
    again = tmp_path / "again"
    pairwise_outputs_write(pairwise_analyze_frame(frame, baseline="human", seed=1, n_boot=30), again)
    for path in paths:
        assert (again / path.name).read_bytes() == path.read_bytes(), path.name


def test_the_length_controlled_fit_removes_a_preference_for_longer_replies():
    frame = simulate(seed=9, n=4000, length_effect=0.6)
    longer = {"gpt4": 2.0, "llama": 1.5, "mixtral": 1.5, "human": 1.0}
    rng = np.random.default_rng(0)
    for side in ("left", "right"):
        typical = 100 * frame[f"{side}_condition"].map(longer)
        frame[f"{side}_length"] = (typical * rng.lognormal(0, 0.4, len(frame))).astype(int)
    # Re-draw the votes so that the longer reply is preferred by 0.6 per doubling on top of THETA.
    theta = frame["left_condition"].map(THETA) - frame["right_condition"].map(THETA)
    d = theta + 0.6 * np.log2(frame["left_length"] / frame["right_length"])
    p_left = 1 / (1 + np.exp(-d))
    frame["choice"] = np.where(rng.random(len(frame)) < p_left, "left", "right")
    plain = bt.davidson_fit(frame, baseline="human")
    controlled = bt.davidson_fit(frame, baseline="human", covariates=["length"])
    assert plain.strengths["gpt4"] == pytest.approx(0.5 + 0.6, abs=0.12)  # length counted as empathy
    assert controlled.strengths["gpt4"] == pytest.approx(0.5, abs=0.15)


# --- power before launch for a pairwise study (manage.py study_power) ----------------------------------------------


class PairPlanKind(StudyKind):
    """A kind declared only here whose power planner is the pairwise one: `study_power` finds the planner through
    the kind's capability, as for any kind."""

    name = "pairplan_test"
    label = "Pairwise plan (test)"
    power_planner = "kinds.pairwise.power.pairwise_power_plan"

    def steps(self, study):
        return []

    def assignments_create(self, participant, *, rng, now):
        return []


@pytest.fixture
def pair_study(db):
    kind = register(PairPlanKind())
    study = StudyFactory(slug="pairs-plan", kind=kind.name, items_per_participant=12)
    for i, name in enumerate(["human", "gpt4", "llama"]):
        ConditionFactory(study=study, name=name, position=i, is_baseline=name == "human")
    yield study
    unregister(kind.name)


def study_power_json(*args) -> dict:
    out = io.StringIO()
    call_command("study_power", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_study_power_plans_pairs_for_a_pairwise_study(pair_study):
    data = study_power_json("pairs-plan", "--design-effect", "1")
    assert (
        data["baseline"] == "human" and data["comparisons"] == 2 and set(data["shares"]) == {"gpt4", "llama"}
    )
    assert data["scale"] == ["baseline preferred", "about the same", "condition preferred"]
    line = next(x for x in data["lines"] if x["condition"] == "gpt4" and x["power"] == 0.8)
    # Two comparisons with the baseline: the first Holm step at 0.025; 55 % of non-tied votes, 25 % ties.
    votes = bt.win_rate_votes_needed(0.55, alpha=0.025, power=0.8)
    assert line["ratings_uncorrected"] == math.ceil(votes)
    assert line["ratings_per_condition"] == math.ceil(votes / 0.75)
    # Three condition pairs share a participant's 12 items.
    assert line["participants_per_condition"] == math.ceil(votes / 0.75 * 3 / 12)
    assert line["effect_size_w"] == pytest.approx(0.1)


def test_one_comparison_at_alpha_five_percent_needs_785_non_tied_votes(pair_study):
    pair_study.conditions.filter(name="llama").delete()
    data = study_power_json("pairs-plan", "--design-effect", "1", "--shares", "gpt4=0.45,0,0.55")
    line = next(x for x in data["lines"] if x["power"] == 0.8)
    assert line["ratings_uncorrected"] == 785 and line["ratings_per_condition"] == 785


def test_the_pairwise_plan_clusters_votes_by_participant_and_says_so(pair_study):
    data = study_power_json("pairs-plan")
    assert "seed study" in data["design_effect_source"]
    # 12 items over 3 pairs: 4 votes a participant per comparison.
    assert data["design_effect"] == pytest.approx(1 + 3 * data["icc"])
    text = io.StringIO()
    call_command("study_power", "pairs-plan", "--icc", "0.05", stdout=text)
    assert "design effect 1.15" in text.getvalue() and "condition preferred" in text.getvalue()
    with pytest.raises(CommandError, match="shares of gpt4 must be three"):
        call_command("study_power", "pairs-plan", "--shares", "gpt4=0.5,0.5", stdout=io.StringIO())
    with pytest.raises(CommandError, match="no prediction-powered"):
        call_command("study_power", "pairs-plan", "--judge-correlation", "0.5", stdout=io.StringIO())
