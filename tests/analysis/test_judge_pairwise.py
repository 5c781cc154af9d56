"""A pairwise judge's pairs, flips and calibration on a small case computed by hand (analysis/judge_pairwise.py)."""

import pandas as pd
import pytest

from kinds.pairwise.judge_analysis import (
    agreement,
    calibration_table,
    flip_table,
    human_majority,
    judge_pairs,
    judge_pairwise_tables,
)

COLUMNS = ["participant", "prompt_id", "left_condition", "right_condition", "choice"]

# People's votes on conditions x (a) and y (b): p1 a (2 a, 1 tie), p2 b, p3 tie (2 ties, 1 a), p4 a, p5 no majority.
HUMAN = pd.DataFrame(
    [
        ("h1", "p1", "x", "y", "left"), ("h2", "p1", "y", "x", "right"), ("h3", "p1", "x", "y", "tie"),
        ("h1", "p2", "y", "x", "left"), ("h2", "p2", "x", "y", "right"),
        ("h1", "p3", "x", "y", "tie"), ("h2", "p3", "y", "x", "tie"), ("h3", "p3", "x", "y", "left"),
        ("h1", "p4", "x", "y", "left"),
        ("h1", "p5", "x", "y", "left"), ("h2", "p5", "x", "y", "right"),
    ],
    columns=COLUMNS,
)  # fmt: skip


def verdicts(rows):
    """The judge's frame: (prompt, left, right, choice) per order, sample 0."""
    frame = pd.DataFrame(rows, columns=COLUMNS[1:]).assign(judge="j", sample_index=0, both_inadequate=False)
    return frame.assign(left_length=10, right_length=10)


# The judge: p1 a in both orders, p2 b in both, p3 a in both, p4 "left" both times (a flip: a, then b), p5 a.
JUDGE = verdicts(
    [
        ("p1", "x", "y", "left"), ("p1", "y", "x", "right"),
        ("p2", "x", "y", "right"), ("p2", "y", "x", "left"),
        ("p3", "x", "y", "left"), ("p3", "y", "x", "right"),
        ("p4", "x", "y", "left"), ("p4", "y", "x", "left"),
        ("p5", "x", "y", "left"), ("p5", "y", "x", "right"),
        ("p6", "x", "y", "left"),  # one order only so far: left out
    ]
)  # fmt: skip


def test_a_pair_flips_when_its_orders_disagree_and_then_counts_as_a_tie():
    pairs = judge_pairs(JUDGE).set_index("prompt_id")
    assert list(pairs.index) == ["p1", "p2", "p3", "p4", "p5"]
    assert list(pairs["verdict"]) == ["a", "b", "a", "tie", "a"]
    assert list(pairs["flipped"]) == [False, False, False, True, False]
    assert pairs.loc["p4", ["verdict_ab", "verdict_ba", "reversed"]].tolist() == ["a", "b", True]


def test_the_flip_rate_is_flipped_pairs_over_pairs_answered_in_both_orders():
    table = flip_table(judge_pairs(JUDGE)).set_index("scope")
    assert table.loc["all", ["pairs", "flips", "reversals"]].tolist() == [5, 1, 1]
    assert table.loc["all", "flip_rate"] == pytest.approx(0.2)
    assert table.loc["x vs y", "flips"] == 1
    assert table.loc["all", "ci_low"] <= 0.2 <= table.loc["all", "ci_high"]


def test_the_human_majority_is_the_one_top_outcome_and_a_tied_top_is_none():
    majority = human_majority(HUMAN).set_index("prompt_id")
    assert majority["majority"].to_dict() == {"p1": "a", "p2": "b", "p3": "tie", "p4": "a", "p5": ""}
    assert majority["votes"].to_dict() == {"p1": 3, "p2": 2, "p3": 3, "p4": 1, "p5": 2}


def test_agreement_and_kappa_against_the_majority_match_the_hand_computation():
    # Decided pairs p1..p4: judge a, b, a, tie; people a, b, tie, a. Agreement 2/4. Both marginals a ½, b ¼,
    # tie ¼: chance ¼ + 1/16 + 1/16 = 0.375, κ = (0.5 − 0.375) / (1 − 0.375) = 0.2.
    assert agreement(["a", "b", "a", "tie"], ["a", "b", "tie", "a"]) == pytest.approx((0.5, 0.2))
    table = calibration_table(judge_pairs(JUDGE), HUMAN, n_boot=200, seed=1).set_index("scope")
    line = table.loc["all"]
    assert (line["pairs"], line["no_majority"]) == (4, 1)
    assert line["agreement"] == pytest.approx(0.5) and line["kappa"] == pytest.approx(0.2)
    assert 0 <= line["agreement_low"] <= 0.5 <= line["agreement_high"] <= 1
    assert line["kappa_low"] <= 0.2 <= line["kappa_high"]


def test_a_perfect_judge_agrees_fully_and_kappa_is_one():
    assert agreement(["a", "b", "tie"], ["a", "b", "tie"]) == pytest.approx((1.0, 1.0))


def test_a_judge_midway_with_one_order_answered_has_tables_with_headers_and_no_rows():
    one_order = JUDGE[JUDGE["left_condition"] == "x"]
    tables = judge_pairwise_tables(
        one_order, HUMAN, None, baseline="x", conditions=["x", "y"], n_boot=20, seed=0
    )
    for name in ("judge_pairwise", "judge_flips", "judge_calibration"):
        assert tables[name].empty and "judge" in tables[name].columns, name
        assert tables[name].to_csv(index=False).startswith("judge,")
