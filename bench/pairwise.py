"""Does the pairwise analysis recover what it should? A seeded simulation from known strengths that prints ONE JSON
object.

    .venv/bin/python bench/pairwise.py [--reps 400] [--boot 200] [--runs 40] [--seed 39] [--quick]

No database: the functions the product uses (kinds.pairwise.bradley_terry) on simulated preference votes.

The simulated votes. Four conditions with known log-strengths (human 0, the baseline; mixtral 0.2, llama 0.45,
gpt4 0.75) and Davidson ties (ν = 0.5: 20 % ties between equals). Each replication draws 50 prompts and 200
raters, each rater answering 10 different prompts, the pairs dealt in a balanced design over the six condition
pairs, left and right at random. What a vote's d = θ_left − θ_right becomes:
* each prompt moves each condition's strength by its own N(0, 0.3²) (a prompt where one reply is unusually good);
* each rater has their own noise: a sensitivity multiplying d (log-normal, σ 0.3), a tie propensity (log ν
  + N(0, 0.3²)), and a side preference γ_r ~ N(0.15, 0.2²) added to d (a left-side bias on average);
* every reply has a length: each condition's typical length (LLM replies longer, as in the published study)
  varying by prompt; in the length scenario d gains 0.3 per doubling of the left reply's length over the right's.

Estimands. Random rater and prompt effects shrink a Bradley–Terry fit's strengths towards 0, so a fit recovers
the population's strengths, not the generating ones: those are computed once from 400,000 simulated votes'
exact outcome probabilities (the fit depends on the cell counts only; their expectation is fitted). The error of
the recovered strengths is reported against both; the intervals' coverage against the population's.

Measured:
* strengths: RMSE and max |error| of the plain fit's strengths, against the generating strengths and the
  population's, over `reps` replications;
* intervals: coverage of the 95 % intervals (kinds.pairwise.bradley_terry.twoway_bootstrap, `boot` replicates per
  bootstrap unit) of each non-baseline strength, pooled and per condition, with its Monte-Carlo SE; beside it the
  pigeonhole bootstrap's percentile interval (raters and prompts resampled at once), the vote bootstrap's
  (clustering ignored) and the Fisher-information Wald interval, on the same replications;
* position: the error of the left share among non-tied votes (kinds.pairwise.bradley_terry.position_bias) and of the
  fitted side advantage γ against the population's, and the coverage of the left share's interval;
* length: in the length scenario (`reps` / 4 replications), the plain fit's mean error against the generating
  strengths (length counted as strength), the length-controlled fit's, its error against the population's
  length-controlled strengths, the bias of β and the coverage of the length-controlled intervals;
* cost: CPU seconds of the whole analysis of a 2,000-vote and a 20,000-vote study (1,000 replicates a bootstrap);
* schedules: votes until every pair of conditions is told apart (every difference's 95 % Wald interval excludes
  0), dealt in batches of 100 by the same chooser (`kinds.pairwise.bradley_terry.adaptive_pair_weights`): balanced
  (uniform weights throughout) and adaptive (warm-up 600 votes, cap 0.3), `runs` runs each, the same seeds.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kinds.pairwise.bradley_terry import (  # noqa: E402
    TIE,
    Votes,
    adaptive_pair_weights,
    bootstrap_replicates,
    davidson_fit,
    position_bias,
    twoway_bootstrap,
)
from kinds.pairwise.report import pairwise_analyze_frame  # noqa: E402

CONDITIONS = ("human", "mixtral", "llama", "gpt4")
THETA = np.array([0.0, 0.2, 0.45, 0.75])
BASELINE = "human"
NU = 0.5
PROMPT_SD = 0.3
SENSITIVITY_SD = 0.3
TIE_SD = 0.3
SIDE_MEAN, SIDE_SD = 0.15, 0.2
# Typical reply lengths in characters (the published study's mean words × ~5.5: human 28, GPT-4 35, LLaMA-2 54,
# Mixtral 61 words), each prompt's reply varying around it (log-normal, σ 0.35).
TYPICAL_LENGTH = np.array([155.0, 335.0, 295.0, 190.0])
LENGTH_SD = 0.35
LENGTH_EFFECT = 0.3  # log-odds per doubling of a reply's length over the other's, in the length scenario
PAIRS = [(i, j) for i in range(len(CONDITIONS)) for j in range(i + 1, len(CONDITIONS))]


def rate(hits) -> dict:
    hits = np.asarray(hits, dtype=float)
    p = float(hits.mean())
    return {"rate": round(p, 4), "mc_se": round(math.sqrt(p * (1 - p) / hits.size), 4), "n": int(hits.size)}


def outcome_probabilities(d: np.ndarray, nu: np.ndarray) -> np.ndarray:
    """(votes × 3) Davidson probabilities of left, right, tie."""
    root = np.exp(d / 2)
    z = root + 1 / root + nu
    return np.column_stack([root / z, 1 / root / z, nu / z])


def latent(rng, raters: int, prompts: int, per_rater: int, pair_counter: int = 0, length_effect: float = 0.0):
    """The design and each vote's d and ν: (left, right, rater, prompt, d, ν, log2 length ratio), pairs dealt in
    rotation."""
    n = raters * per_rater
    prompt_effect = rng.normal(0, PROMPT_SD, (prompts, len(CONDITIONS)))
    sensitivity = np.exp(rng.normal(0, SENSITIVITY_SD, raters))
    tie = NU * np.exp(rng.normal(0, TIE_SD, raters))
    side = rng.normal(SIDE_MEAN, SIDE_SD, raters)
    rater = np.repeat(np.arange(raters), per_rater)
    if prompts >= n:  # the population: a fresh prompt for every vote
        prompt = np.arange(n)
    else:
        prompt = np.concatenate([rng.choice(prompts, per_rater, replace=False) for _ in range(raters)])
    pair = np.array(PAIRS)[(np.arange(n) + pair_counter) % len(PAIRS)]
    flip = rng.random(n) < 0.5
    left = np.where(flip, pair[:, 1], pair[:, 0])
    right = np.where(flip, pair[:, 0], pair[:, 1])
    strength = THETA[None, :] + prompt_effect
    lengths = TYPICAL_LENGTH[None, :] * rng.lognormal(0, LENGTH_SD, (prompts, len(CONDITIONS)))
    ratio = np.log2(lengths[prompt, left] / lengths[prompt, right])
    d = sensitivity[rater] * (strength[prompt, left] - strength[prompt, right] + length_effect * ratio)
    return left, right, rater, prompt, d + side[rater], tie[rater], ratio


def simulate(
    rng, raters: int = 200, prompts: int = 50, per_rater: int = 10, length_effect: float = 0.0
) -> Votes:
    left, right, rater, prompt, d, nu, ratio = latent(
        rng, raters, prompts, per_rater, int(rng.integers(6)), length_effect
    )
    p = outcome_probabilities(d, nu)
    outcome = (rng.random(d.size)[:, None] > p.cumsum(axis=1)).sum(axis=1).clip(0, 2)
    return Votes(CONDITIONS, left, right, outcome, rater, prompt, ratio)


def as_frame(votes: Votes) -> pd.DataFrame:
    """The votes as the analysis' frame; reply lengths around 155 characters whose log2 ratio is the vote's."""
    half = 2.0 ** (votes.length_log2_ratio / 2)
    return pd.DataFrame(
        {
            "participant": votes.rater,
            "prompt_id": votes.prompt,
            "left_condition": np.array(CONDITIONS)[votes.left],
            "right_condition": np.array(CONDITIONS)[votes.right],
            "choice": np.array(["left", "right", "tie"])[votes.outcome],
            "both_inadequate": False,
            "response_time_ms": 10_000,
            "left_length": np.round(155 * half),
            "right_length": np.round(155 / half),
            "position": np.arange(votes.n) % 10,
        }
    )


def population(rng, votes: int = 400_000, length_effect: float = 0.0) -> dict:
    """The population's strengths, side advantage and left share (and with a length effect, the length-controlled
    fit's strengths and β): the fits of the expected outcomes of a very large study (fresh raters and prompts for
    every vote)."""
    raters = votes // 10
    left, right, _, _, d, nu, ratio = latent(rng, raters, votes, 10, length_effect=length_effect)
    p = outcome_probabilities(d, nu)
    n = d.size
    expected = Votes(
        CONDITIONS,
        np.repeat(left, 3),
        np.repeat(right, 3),
        np.tile(np.arange(3), n),
        np.zeros(3 * n, dtype=np.int64),
        np.zeros(3 * n, dtype=np.int64),
        np.repeat(ratio, 3),
    )
    weights = p.ravel()
    plain = davidson_fit(expected, baseline=BASELINE, weights=weights, check=False)
    sided = davidson_fit(expected, baseline=BASELINE, weights=weights, covariates=["position"], check=False)
    extra = {}
    if length_effect:
        controlled = davidson_fit(
            expected, baseline=BASELINE, weights=weights, covariates=["length"], check=False
        )
        extra = {
            "strengths_lc": np.array([controlled.strengths[c] for c in CONDITIONS]),
            "length": controlled.coefficients["length"],
        }
    return {
        **extra,
        "strengths": np.array([plain.strengths[c] for c in CONDITIONS]),
        "tie": plain.tie,
        "side": sided.coefficients["position"],
        "left_share": float(p[:, 0].sum() / (p[:, 0].sum() + p[:, 1].sum())),
    }


def replication(rng, truth: dict, boot: int) -> dict:
    votes = simulate(rng)
    fit = davidson_fit(votes, baseline=BASELINE)
    seed = int(rng.integers(1 << 31))
    started = time.perf_counter()
    boot_result = twoway_bootstrap(votes, fit, n_boot=boot, seed=seed)
    seconds = time.perf_counter() - started
    pigeon, _ = bootstrap_replicates(
        votes, fit, unit="pigeonhole", n_boot=boot, rng=np.random.default_rng(seed)
    )
    estimate = np.array([fit.strengths[c] for c in CONDITIONS])
    se_fisher = np.array([fit.strength_se()[c] for c in CONDITIONS])
    others = [i for i, c in enumerate(CONDITIONS) if c != BASELINE]
    target = truth["strengths"]
    twoway = [
        boot_result.ci_low[CONDITIONS[i]] <= target[i] <= boot_result.ci_high[CONDITIONS[i]] for i in others
    ]
    low, high = np.percentile(pigeon[:, : len(CONDITIONS)], [2.5, 97.5], axis=0)
    pigeonhole = [low[i] <= target[i] <= high[i] for i in others]
    vote_se = np.sqrt([boot_result.variances["vote"][CONDITIONS[i]] for i in others])
    vote = [abs(estimate[i] - target[i]) <= 1.959964 * s for i, s in zip(others, vote_se, strict=True)]
    fisher = [abs(estimate[i] - target[i]) <= 1.959964 * se_fisher[i] for i in others]
    frame = as_frame(votes)
    bias = position_bias(frame)
    sided = davidson_fit(votes, baseline=BASELINE, covariates=["position"])
    return {
        "estimate": estimate,
        "twoway": twoway,
        "pigeonhole": pigeonhole,
        "vote": vote,
        "fisher": fisher,
        "left_share": bias["left_share"],
        "left_covered": bias["ci_low"] <= truth["left_share"] <= bias["ci_high"],
        "side": sided.coefficients["position"],
        "bootstrap_seconds": seconds,
        "unbounded": sum(boot_result.unbounded.values()),
    }


def coverage(rng, truth: dict, reps: int, boot: int) -> dict:
    rows = [replication(rng, truth, boot) for _ in range(reps)]
    estimates = np.array([r["estimate"] for r in rows])
    others = [i for i, c in enumerate(CONDITIONS) if c != BASELINE]

    def errors(target):
        diff = estimates[:, others] - target[others]
        return {
            "rmse": round(float(np.sqrt((diff**2).mean())), 4),
            "max_abs": round(float(np.abs(diff).max()), 4),
        }

    def pooled(key):
        return rate(np.concatenate([r[key] for r in rows]))

    per_condition = {CONDITIONS[i]: rate([r["twoway"][n] for r in rows]) for n, i in enumerate(others)}
    left = np.array([r["left_share"] for r in rows]) - truth["left_share"]
    side = np.array([r["side"] for r in rows]) - truth["side"]
    return {
        "replications": reps,
        "bootstrap_replicates_per_unit": boot,
        "votes_per_replication": 2000,
        "strength_error_vs_generating": errors(THETA),
        "strength_error_vs_population": errors(truth["strengths"]),
        "mean_error_vs_population": {
            CONDITIONS[i]: round(float((estimates[:, i] - truth["strengths"][i]).mean()), 4) for i in others
        },
        "coverage_95": {
            "twoway_cluster_bootstrap": pooled("twoway"),
            "twoway_by_condition": per_condition,
            "pigeonhole_percentile": pooled("pigeonhole"),
            "vote_bootstrap_ignoring_clusters": pooled("vote"),
            "fisher_wald_ignoring_clusters": pooled("fisher"),
        },
        "position": {
            "left_share_bias": round(float(left.mean()), 5),
            "left_share_rmse": round(float(np.sqrt((left**2).mean())), 5),
            "left_share_max_abs": round(float(np.abs(left).max()), 5),
            "left_share_interval_coverage": rate([r["left_covered"] for r in rows]),
            "side_advantage_bias": round(float(side.mean()), 5),
            "side_advantage_rmse": round(float(np.sqrt((side**2).mean())), 5),
        },
        "bootstrap_seconds_mean": round(float(np.mean([r["bootstrap_seconds"] for r in rows])), 4),
        "replicates_with_an_unbounded_strength": int(sum(r["unbounded"] for r in rows)),
    }


def length_scenario(rng, reps: int, boot: int) -> dict:
    """Votes that also prefer the longer reply (LENGTH_EFFECT per doubling): the plain fit counts length as
    strength, the length-controlled one should not."""
    truth = population(rng, length_effect=LENGTH_EFFECT)
    others = [i for i, c in enumerate(CONDITIONS) if c != BASELINE]
    plain, controlled, beta, covered = [], [], [], []
    for _ in range(reps):
        votes = simulate(rng, length_effect=LENGTH_EFFECT)
        plain.append([davidson_fit(votes, baseline=BASELINE).strengths[c] for c in CONDITIONS])
        fit = davidson_fit(votes, baseline=BASELINE, covariates=["length"])
        controlled.append([fit.strengths[c] for c in CONDITIONS])
        beta.append(fit.coefficients["length"])
        result = twoway_bootstrap(
            votes, fit, covariates=["length"], n_boot=boot, seed=int(rng.integers(1 << 31))
        )
        covered += [result.ci_low[CONDITIONS[i]] <= truth["strengths_lc"][i] <= result.ci_high[CONDITIONS[i]]
                    for i in others]  # fmt: skip
    plain, controlled = np.array(plain), np.array(controlled)
    lc_error = controlled[:, others] - truth["strengths_lc"][others]

    def by_condition(values):
        return {CONDITIONS[i]: round(float(values[n]), 4) for n, i in enumerate(others)}

    return {
        "replications": reps,
        "length_effect_per_doubling": LENGTH_EFFECT,
        "typical_lengths": dict(zip(CONDITIONS, TYPICAL_LENGTH.tolist(), strict=True)),
        "plain_mean_error_vs_generating": by_condition((plain[:, others] - THETA[others]).mean(axis=0)),
        "length_controlled_mean_error_vs_generating": by_condition(
            (controlled[:, others] - THETA[others]).mean(axis=0)
        ),
        "length_controlled_error_vs_population": {
            "rmse": round(float(np.sqrt((lc_error**2).mean())), 4),
            "max_abs": round(float(np.abs(lc_error).max()), 4),
        },
        "population_length_coefficient": round(truth["length"], 4),
        "length_coefficient_bias": round(float(np.mean(beta) - truth["length"]), 4),
        "length_controlled_coverage_95": rate(covered),
    }


# --- schedules ------------------------------------------------------------------------------------------------------


def separated(votes: Votes) -> bool:
    """Every pair's difference of strengths has a 95 % Wald interval (inverse Fisher information) excluding 0."""
    try:
        fit = davidson_fit(votes, baseline=BASELINE)
    except ValueError:
        return False
    cov = fit.strength_covariance()
    theta = np.array([fit.strengths[c] for c in CONDITIONS])
    for i, j in PAIRS:
        se = math.sqrt(cov[i, i] + cov[j, j] - 2 * cov[i, j])
        if abs(theta[i] - theta[j]) < 1.959964 * se:
            return False
    return True


def schedule_run(
    seed: int, *, adaptive: bool, warmup: int, cap: float, batch: int = 100, limit: int = 40_000
):
    """Votes until the conditions are told apart, pairs dealt by `adaptive_pair_weights`; None past `limit`."""
    rng = np.random.default_rng(seed)
    rater_effects = {}
    columns = {k: [] for k in ("left", "right", "rater", "prompt", "outcome")}
    dealt = np.zeros(len(PAIRS))
    prompts = rng.normal(0, PROMPT_SD, (400, len(CONDITIONS)))
    total = 0
    while total < limit:
        frame = pd.DataFrame(
            {
                "participant": columns["rater"],
                "prompt_id": columns["prompt"],
                "left_condition": [CONDITIONS[i] for i in columns["left"]],
                "right_condition": [CONDITIONS[i] for i in columns["right"]],
                "choice": [("left", "right", "tie")[o] for o in columns["outcome"]],
            }
        )
        weights = adaptive_pair_weights(frame, CONDITIONS, warmup=warmup if adaptive else limit + 1, cap=cap)
        share = np.array([weights[(CONDITIONS[i], CONDITIONS[j])] for i, j in PAIRS])
        for _ in range(batch):  # deal the pair furthest below its share (deterministic apportionment)
            k = int(np.argmax(share * (total + 1) - dealt))
            dealt[k] += 1
            total += 1
            i, j = PAIRS[k]
            rater = total // 10
            if rater not in rater_effects:
                rater_effects[rater] = (
                    math.exp(rng.normal(0, SENSITIVITY_SD)),
                    NU * math.exp(rng.normal(0, TIE_SD)),
                    rng.normal(SIDE_MEAN, SIDE_SD),
                )
            sensitivity, nu, side = rater_effects[rater]
            left, right = (i, j) if rng.random() < 0.5 else (j, i)
            prompt = int(rng.integers(len(prompts)))
            strength = THETA + prompts[prompt]
            d = sensitivity * (strength[left] - strength[right]) + side
            p = outcome_probabilities(np.array([d]), np.array([nu]))[0]
            outcome = int(min((rng.random() > p.cumsum()).sum(), TIE))
            for key, value in zip(columns, (left, right, rater, prompt, outcome), strict=True):
                columns[key].append(value)
        votes = Votes(
            CONDITIONS,
            np.array(columns["left"]),
            np.array(columns["right"]),
            np.array(columns["outcome"]),
            np.array(columns["rater"]),
            np.array(columns["prompt"]),
            np.zeros(total),
        )
        if separated(votes):
            return total
    return None


def schedules(seed: int, runs: int, warmup: int = 600, cap: float = 0.3) -> dict:
    out = {}
    for label, adaptive in (("balanced", False), ("adaptive", True)):
        needed = [schedule_run(seed + r, adaptive=adaptive, warmup=warmup, cap=cap) for r in range(runs)]
        done = [n for n in needed if n is not None]
        out[label] = {
            "runs": runs,
            "separated_within_limit": len(done),
            "votes_median": float(np.median(done)) if done else None,
            "votes_mean": round(float(np.mean(done)), 1) if done else None,
            "votes_quartiles": [float(q) for q in np.percentile(done, [25, 75])] if done else None,
        }
    balanced, adaptive = out["balanced"]["votes_mean"], out["adaptive"]["votes_mean"]
    out["adaptive_over_balanced_mean_votes"] = (
        round(adaptive / balanced, 3) if balanced and adaptive else None
    )
    out["warmup_votes"], out["cap"], out["batch"] = warmup, cap, 100
    return out


def analysis_cost(rng, sizes) -> list[dict]:
    """CPU seconds of the whole analysis (`pairwise_analyze_frame`, 1,000 replicates per bootstrap: the plain,
    length-controlled and side-adjusted fits) of one simulated study per size (10 votes a rater, 200 prompts,
    the length scenario's votes)."""
    out = []
    for votes in sizes:
        frame = as_frame(simulate(rng, raters=votes // 10, prompts=200, length_effect=LENGTH_EFFECT))
        started = time.process_time()
        pairwise_analyze_frame(frame, baseline=BASELINE, seed=0, n_boot=1000)
        out.append({"votes": votes, "cpu_seconds": round(time.process_time() - started, 1)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--boot", type=int, default=200)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument(
        "--quick", action="store_true", help="40 replications, 100 replicates, 6 schedule runs"
    )
    args = parser.parse_args()
    if args.quick:
        args.reps, args.boot, args.runs = 40, 100, 6
    started = time.monotonic()
    rng = np.random.default_rng(args.seed)
    truth = population(rng)
    report = {
        "seed": args.seed,
        "quick": args.quick,
        "conditions": list(CONDITIONS),
        "generating_strengths": THETA.tolist(),
        "population": {
            "strengths": [round(float(x), 4) for x in truth["strengths"]],
            "tie": round(truth["tie"], 4),
            "side_advantage": round(truth["side"], 4),
            "left_share": round(truth["left_share"], 4),
        },
        "recovery": coverage(rng, truth, args.reps, args.boot),
        "length": length_scenario(rng, max(args.reps // 4, 5), args.boot),
        "schedules": schedules(args.seed, args.runs),
        "analysis_cost": analysis_cost(rng, (2000,) if args.quick else (2000, 20000)),
    }
    cover = report["recovery"]["coverage_95"]["twoway_cluster_bootstrap"]["rate"]
    schedules_ = report["schedules"]
    report["must_show"] = {
        "coverage_in_0.93_0.97": 0.93 <= cover <= 0.97,
        "coverage": cover,
        "strength_rmse_vs_population": report["recovery"]["strength_error_vs_population"]["rmse"],
        "adaptive_votes_to_separate": schedules_["adaptive"]["votes_mean"],
        "balanced_votes_to_separate": schedules_["balanced"]["votes_mean"],
        "left_share_rmse": report["recovery"]["position"]["left_share_rmse"],
    }
    report["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
