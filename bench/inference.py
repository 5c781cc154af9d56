"""Does the analysis' inference hold when each participant gives many ratings? A seeded simulation study that
prints ONE JSON object.

    .venv/bin/python bench/inference.py [--reps 1000] [--seed 38] [--omega-seeds 50]

No database, no services: the functions the product uses (analysis.clustered, analysis.ppi, analysis.calibration,
analysis.judge_screening, analysis.alt_test, analysis.stats) on simulated studies, at a within-rater ICC of the
top rating of 0, 0.02 and 0.1 and, for the prediction-powered intervals, with 10 % and 20 % of the responses
labelled by whole participants. Every rate comes with its Monte-Carlo standard error. Beside each new procedure,
the OLD one it replaced is measured on the same simulated data ("old_*").

The simulated ratings: a latent y* = u_rater + v_response + e (normal, variance 1), cut at the condition's
Bad/Okay/Good quantiles (the seed study's published shares, analysis.power.SEED_SHARES); the rater variance is
solved so that the top rating's ICC within a rater is the cell's ICC. The judge sees v_response + its own noise.

Measured, per ICC (and labelled fraction for PPI):
* primary: the rejection rate at nominal 5 % of the primary test (participant-clustered Wald on the top share,
  analysis.clustered.clustered_difference) with no difference between two conditions of 200 participants × 10
  ratings; old: the seed study's 2×2 Yates χ² on the same data.
* ppi: coverage of the 95 % intervals of the Good share (GPT-4-like condition) and of the Good difference, human-
  only and PPI, cluster-robust (new) and not (old), a pool of 4,000 responses per condition all judged.
* drift: the false-alarm rate at 5 % of the paired two-way-clustered test (analysis.clustered.
  twoway_clustered_difference, what kinds.rating.waves.drift_test runs) when 20 re-raters × 10 (a wave's default 10 %) rate exactly like
  the 200 original raters, and its power for a 10-point drop of Good; old: the χ² of the re-ratings against all
  2,000 original ratings (the old warning fired on that χ² OR a bootstrap interval, so its rate was at least this).
* screening: the bias of the corrected Good share (analysis.judge_screening.corrected_shares) for a judge 80 %
  correct in every condition, calibrated on 6,000 pairs with the published human shares, screening 2,000
  responses whose true Good share is 0.80, 0.493 or 0.30; old: P(human | judge) from the calibration pairs.
* condition check: the false-positive rate at 5 % of analysis.calibration.condition_check for a judge that keeps
  the human value with probability 0.7 in every condition (2,000 pairs per condition, the human and GPT-4
  shares), and its detection of a judge calling Okay "Good" 22 % of the time on the LLM condition against 9 % on
  the human one; old: Welch's t on the mean (judge − human) gaps.
* alt-test: ω of the combined-annotator alt-test (400 responses × 3–5 ratings, raters of 10; a judge about as
  good as a person, so ω is near the 0.5 threshold) over seeds 0..omega_seeds−1, its spread (max − min),
  averaged over pairings (new) and with one pairing (old).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps
from scipy.optimize import brentq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.alt_test import alternative_annotator_test  # noqa: E402
from analysis.calibration import condition_check  # noqa: E402
from analysis.clustered import clustered_difference, twoway_clustered_difference  # noqa: E402
from analysis.judge_screening import corrected_shares  # noqa: E402
from analysis.power import SEED_SHARES  # noqa: E402
from analysis.ppi import classical_mean, difference, ppi_mean, shared_lambda  # noqa: E402
from analysis.stats import chi_square  # noqa: E402

ICCS = (0.0, 0.02, 0.1)
FRACTIONS = (0.10, 0.20)
HUMAN = np.array(SEED_SHARES["human"])
GPT4 = np.array(SEED_SHARES["chatgpt_empathy"])
RESPONSE_VARIANCE = 0.5  # latent variance of a response's quality (what the judge can see)
ALPHA = 0.05


def rate(hits: np.ndarray) -> dict:
    """A rate (rejection, coverage) with its Monte-Carlo standard error."""
    hits = np.asarray(hits, dtype=float)
    p = float(hits.mean())
    return {
        "rate": round(p, 4),
        "mc_se": round(math.sqrt(p * (1 - p) / hits.size), 4),
        "reps": int(hits.size),
    }


def mean_se(values: np.ndarray) -> dict:
    values = np.asarray(values, dtype=float)
    return {
        "mean": round(float(values.mean()), 5),
        "mc_se": round(float(values.std(ddof=1) / math.sqrt(values.size)), 5),
    }


def cuts(shares: np.ndarray) -> tuple[float, float]:
    """Latent thresholds (variance 1) giving Bad/Okay/Good `shares`."""
    return float(sps.norm.ppf(shares[0])), float(sps.norm.ppf(1 - shares[2]))


def rater_variance(icc: float, top_share: float) -> float:
    """The latent rater variance whose top-rating ICC within a rater is `icc`."""
    if icc == 0:
        return 0.0
    tau = sps.norm.ppf(1 - top_share)
    p = top_share

    def binary_icc(rho: float) -> float:
        both = sps.multivariate_normal(mean=[0, 0], cov=[[1, rho], [rho, 1]]).cdf([-tau, -tau])
        return (both - p * p) / (p * (1 - p)) - icc

    return float(brentq(binary_icc, 1e-6, 0.49))


def values_of(latent: np.ndarray, shares: np.ndarray) -> np.ndarray:
    low, high = cuts(shares)
    return 1 + (latent > low).astype(int) + (latent > high).astype(int)


# --- the primary test ------------------------------------------------------------------------------------------


def primary(rng, su2: float, reps: int) -> dict:
    people, items = 200, 10
    tau = cuts(HUMAN)[1]
    clusters = np.repeat(np.arange(people), items)
    new, old = [], []
    for _ in range(reps):
        ys = []
        for _side in range(2):
            u = np.repeat(rng.normal(0, math.sqrt(su2), people), items)
            ys.append((u + rng.normal(0, math.sqrt(1 - su2), people * items) > tau).astype(float))
        new.append(clustered_difference(ys[0], clusters, ys[1], clusters).p < ALPHA)
        counts = np.array([[y.sum(), y.size - y.sum()] for y in ys])
        old.append(chi_square(counts, yates=True).p < ALPHA)
    return {"new_clustered_wald": rate(new), "old_yates_chi2": rate(old)}


# --- PPI coverage -----------------------------------------------------------------------------------------------


def ppi_cell(rng, su2: float, fraction: float, reps: int) -> dict:
    pool, items = 4000, 10
    labelled = int(pool * fraction)
    people = labelled // items
    rater = np.repeat(np.arange(people), items)
    sv2 = RESPONSE_VARIANCE
    truth = {"human": HUMAN[2], "gpt4": GPT4[2]}
    hits = {k: [] for k in ("share_human", "share_ppi", "diff_human", "diff_ppi")}
    old = {k: [] for k in ("share_human", "share_ppi", "diff_human", "diff_ppi")}
    for _ in range(reps):
        est_new, est_old = {}, {}
        for name, shares in (("human", HUMAN), ("gpt4", GPT4)):
            v = rng.normal(0, math.sqrt(sv2), pool)
            judge = values_of(v + rng.normal(0, math.sqrt(1 - sv2), pool), shares)
            u = np.repeat(rng.normal(0, math.sqrt(su2), people), items)
            latent = u + v[:labelled] + rng.normal(0, math.sqrt(1 - sv2 - su2), labelled)
            human = values_of(latent, shares)
            ys = [(human == k).astype(float) for k in (1, 2, 3)]
            fs = [(judge[:labelled] == k).astype(float) for k in (1, 2, 3)]
            fus = [(judge[labelled:] == k).astype(float) for k in (1, 2, 3)]
            lam = shared_lambda(ys, fs, fus)
            est_new[name] = (
                classical_mean(ys[2], clusters=rater),
                ppi_mean(ys[2], fs[2], fus[2], lam=lam, clusters=rater),
            )
            est_old[name] = (classical_mean(ys[2]), ppi_mean(ys[2], fs[2], fus[2], lam=lam))
        for store, est in ((hits, est_new), (old, est_old)):
            for i, kind in enumerate(("human", "ppi")):
                share = est["gpt4"][i]
                store[f"share_{kind}"].append(share.ci_low <= truth["gpt4"] <= share.ci_high)
                d = difference(est["gpt4"][i], est["human"][i])
                store[f"diff_{kind}"].append(d.ci_low <= truth["gpt4"] - truth["human"] <= d.ci_high)
    return {
        "labelled_fraction": fraction,
        "labelled_ratings_per_condition": labelled,
        "participants_per_condition": people,
        "new_clustered": {k: rate(v) for k, v in hits.items()},
        "old_unclustered": {k: rate(v) for k, v in old.items()},
    }


# --- drift -------------------------------------------------------------------------------------------------------


def drift(rng, su2: float, reps: int, drop: float) -> dict:
    responses, people, items, rerated, rerate_people = 2000, 200, 10, 200, 20
    sv2 = RESPONSE_VARIANCE
    se = math.sqrt(1 - sv2 - su2)
    shifted = np.array([HUMAN[0], HUMAN[1] + drop, HUMAN[2] - drop])
    new, old = [], []
    for _ in range(reps):
        v = rng.normal(0, math.sqrt(sv2), responses)
        rater0 = rng.permutation(np.repeat(np.arange(people), items))
        u0 = rng.normal(0, math.sqrt(su2), people)
        y0 = values_of(u0[rater0] + v + rng.normal(0, se, responses), HUMAN)
        pick = rng.choice(responses, rerated, replace=False)
        rater1 = rng.permutation(np.repeat(np.arange(rerate_people), items))
        u1 = rng.normal(0, math.sqrt(su2), rerate_people)
        y1 = values_of(u1[rater1] + v[pick] + rng.normal(0, se, rerated), shifted)
        top = np.concatenate([y0[pick] == 3, y1 == 3]).astype(float)
        side = np.r_[np.zeros(rerated, int), np.ones(rerated, int)]
        raters = np.r_[rater0[pick], rater1 + people]
        test = twoway_clustered_difference(top, side, np.r_[pick, pick], raters, level=1 - ALPHA)
        new.append(test.p < ALPHA)
        counts = np.array([[np.sum(y == k) for k in (1, 2, 3)] for y in (y0, y1)])
        old.append(chi_square(counts, yates=False).p < ALPHA)
    return {"new_paired_twoway": rate(new), "old_chi2_vs_all_original": rate(old)}


# --- screening ---------------------------------------------------------------------------------------------------

JUDGE_80 = np.full((3, 3), 0.1) + np.eye(3) * 0.7  # P(judge = u | human = v): 80 % correct


def old_corrected_good(judge_counts: np.ndarray, confusion: np.ndarray) -> float:
    """The old correction: Σ_u q_u P(human = Good | judge = u), P from the calibration pairs."""
    given = confusion / confusion.sum(axis=0, keepdims=True)
    return float(given[2] @ (judge_counts / judge_counts.sum()))


def screening(rng, reps: int) -> dict:
    out = {}
    for good in (0.80, 0.493, 0.30):
        truth = np.array([(1 - good) / 3, 2 * (1 - good) / 3, good])
        new, old, covered = [], [], []
        for _ in range(reps):
            human = rng.choice(3, 6000, p=HUMAN)
            calib_judge = _misclassify(rng, human, JUDGE_80)
            confusion = np.zeros((3, 3))
            np.add.at(confusion, (human, calib_judge), 1)
            screened = _misclassify(rng, rng.choice(3, 2000, p=truth), JUDGE_80)
            counts = np.bincount(screened, minlength=3).astype(float)
            est, lo, hi = corrected_shares(counts, confusion, b=200, seed=int(rng.integers(1 << 30)))
            new.append(est[2] - good)
            covered.append(lo[2] <= good <= hi[2])
            old.append(old_corrected_good(counts, confusion) - good)
        out[f"true_good_{good}"] = {
            "new_bias": mean_se(np.array(new)),
            "new_ci_coverage": rate(covered),
            "old_bias": mean_se(np.array(old)),
        }
    return out


def _misclassify(rng, values: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Each value v (0-based) replaced by a draw from row v of `matrix`."""
    cumulative = matrix.cumsum(axis=1)[values]
    return (rng.random(values.size)[:, None] > cumulative).sum(axis=1).clip(0, 2)


# --- the condition check -------------------------------------------------------------------------------------------

KEEP_70 = np.full((3, 3), 0.15) + np.eye(3) * 0.55  # keeps the human value with probability 0.7
FAIR = np.array([[0.80, 0.15, 0.05], [0.10, 0.81, 0.09], [0.03, 0.12, 0.85]])
LENIENT = np.array([[0.80, 0.15, 0.05], [0.10, 0.68, 0.22], [0.03, 0.12, 0.85]])


def _pairs(rng, matrices: dict[str, np.ndarray], n: int) -> pd.DataFrame:
    frames = []
    for name, shares in (("human", HUMAN), ("gpt4", GPT4)):
        human = rng.choice(3, n, p=shares)
        judge = _misclassify(rng, human, matrices[name])
        frames.append(
            pd.DataFrame(
                {
                    "response_id": [f"{name}{i}" for i in range(n)],
                    "condition": name,
                    "human": human + 1,
                    "judge": judge + 1,
                }  # fmt: skip
            )
        )
    return pd.concat(frames, ignore_index=True)


def _old_condition_p(pairs: pd.DataFrame) -> float:
    gap = pairs["judge"] - pairs["human"]
    return float(sps.ttest_ind(gap[pairs["condition"] == "gpt4"], gap[pairs["condition"] == "human"],
                               equal_var=False).pvalue)  # fmt: skip


def condition(rng, reps: int, n: int = 2000) -> dict:
    out = {}
    for label, matrices in (
        ("identical_judge", {"human": KEEP_70, "gpt4": KEEP_70}),
        ("lenient_to_gpt4", {"human": FAIR, "gpt4": LENIENT}),
    ):
        new, old = [], []
        for _ in range(reps):
            pairs = _pairs(rng, matrices, n)
            line = condition_check(pairs, [1, 2, 3], "human").set_index("condition").loc["gpt4"]
            new.append(line["p"] < ALPHA)
            old.append(_old_condition_p(pairs) < ALPHA)
        out[label] = {"new_stratified_chi2": rate(new), "old_welch_on_gaps": rate(old)}
    return out


# --- the alt-test's ω over seeds -------------------------------------------------------------------------------------


def omega_spread(rng, su2: float, seeds: int) -> dict:
    responses = 400
    per = rng.integers(3, 6, responses)
    response = np.repeat(np.arange(responses), per)
    n = response.size
    raters = rng.permutation(np.arange(n) // 10)
    sv2 = RESPONSE_VARIANCE
    v = rng.normal(0, math.sqrt(sv2), responses)
    u = rng.normal(0, math.sqrt(su2), raters.max() + 1)
    human = values_of(u[raters] + v[response] + rng.normal(0, math.sqrt(1 - sv2 - su2), n), HUMAN)
    judge = values_of(v + rng.normal(0, math.sqrt(1 - sv2), responses), HUMAN)  # about as good as a person
    frame = pd.DataFrame({"response_id": response, "rater": raters, "value": human})
    series = pd.Series(judge, index=np.arange(responses))
    result = {}
    for label, pairings in (("new_averaged", None), ("old_one_pairing", 1)):
        kwargs = {} if pairings is None else {"pairings": pairings}
        omegas = [
            alternative_annotator_test(frame, series, seed=s, **kwargs).winning_rate for s in range(seeds)
        ]
        result[label] = {
            "spread": round(max(omegas) - min(omegas), 4),
            "min": round(min(omegas), 4),
            "max": round(max(omegas), 4),
            "mean": round(float(np.mean(omegas)), 4),
        }
    result["seeds"] = seeds
    return result


# --- the study -------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--omega-seeds", type=int, default=50)
    args = parser.parse_args()
    started = time.monotonic()
    rng = np.random.default_rng(args.seed)
    cells = []
    for icc in ICCS:
        su2 = rater_variance(icc, HUMAN[2])
        cell = {
            "icc": icc,
            "latent_rater_variance": round(su2, 5),
            "primary_no_difference": primary(rng, su2, args.reps),
            "drift_no_change": drift(rng, su2, args.reps, 0.0),
            "drift_10_point_drop": drift(rng, su2, args.reps, 0.10),
            "ppi": [ppi_cell(rng, su2, f, args.reps) for f in FRACTIONS],
            "alt_test_omega_over_seeds": omega_spread(rng, su2, args.omega_seeds),
        }
        cells.append(cell)
    judge = {"screening": screening(rng, args.reps), "condition_check": condition(rng, args.reps)}
    report = {"reps": args.reps, "seed": args.seed, "cells": cells, **judge}
    report["must_show"] = must_show(report)
    report["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(report))


def must_show(report: dict) -> dict:
    """The issue's thresholds, checked on this run's figures."""
    nominal, coverage, bias, spread = [], [], [], []
    for cell in report["cells"]:
        nominal.append(cell["primary_no_difference"]["new_clustered_wald"]["rate"])
        nominal.append(cell["drift_no_change"]["new_paired_twoway"]["rate"])
        for ppi in cell["ppi"]:
            coverage += [v["rate"] for v in ppi["new_clustered"].values()]
        spread.append(cell["alt_test_omega_over_seeds"]["new_averaged"]["spread"])
    nominal.append(report["condition_check"]["identical_judge"]["new_stratified_chi2"]["rate"])
    for line in report["screening"].values():
        bias.append(abs(line["new_bias"]["mean"]))
        coverage.append(line["new_ci_coverage"]["rate"])
    return {
        "nominal_5pct_rates_in_3.5_6.5": all(0.035 <= r <= 0.065 for r in nominal),
        "nominal_rates": nominal,
        "coverage_in_0.93_0.97": all(0.93 <= c <= 0.97 for c in coverage),
        "coverage_range": [min(coverage), max(coverage)],
        "corrected_share_abs_bias_below_0.01": all(b < 0.01 for b in bias),
        "max_abs_bias": max(bias),
        "omega_spread_below_0.05": all(s < 0.05 for s in spread),
        "max_omega_spread": max(spread),
        "reps_at_least_1000": report["reps"] >= 1000,
    }


if __name__ == "__main__":
    main()
