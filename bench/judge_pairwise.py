"""Does a pairwise judge's flip rate come out right, with honest intervals? A seeded simulation that prints ONE JSON
object.

    .venv/bin/python bench/judge_pairwise.py [--reps 300] [--prompts 100] [--seed 39]

No database: the functions the product uses (kinds.pairwise.judge_analysis) on simulated judge verdicts.

The simulated judge. Three conditions with known log-strengths (human 0, the baseline; llm1 0.4; llm2 0.8) and
Davidson ties (ν = 0.5); each prompt moves each condition's strength by its own N(0, 0.3²). On every prompt and
condition pair the judge holds one honest opinion t (a, b or tie, drawn from the Davidson probabilities) and is
asked in both orders; in each order, independently, with probability q it answers "A" whatever is shown (a judge
led by the position), else t. The pair flips when the two orders differ; its probability given the prompt is
1 − (1 − q)² − q(1 − q)(P(t = a) + P(t = b)), and the population's flip rate is its mean over prompt effects
(computed from 200,000 draws).

Measured, per q: the mean flip rate estimated (`flip_table`, all pairs) and its bias against the population's, the
coverage of its 95 % interval clustered by prompt (Monte-Carlo SE beside it), and the time to build every judge
table (`judge_pairwise_tables`, 1,000 calibration bootstrap replicates, 200 strength replicates) on one replication.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kinds.pairwise.judge_analysis import flip_table, judge_pairs, judge_pairwise_tables  # noqa: E402

CONDITIONS = ("human", "llm1", "llm2")
THETA = np.array([0.0, 0.4, 0.8])
NU = 0.5
PROMPT_SD = 0.3
QS = (0.0, 0.1, 0.3)


def davidson(d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P(a wins), P(b wins), P(tie) for d = θ_a − θ_b."""
    ea, eb, et = np.exp(d / 2), np.exp(-d / 2), NU * np.ones_like(d)
    total = ea + eb + et
    return ea / total, eb / total, et / total


def population_flip_rate(q: float, rng: np.random.Generator, draws: int = 200_000) -> float:
    rates = []
    for i, j in combinations(range(len(THETA)), 2):
        d = THETA[i] - THETA[j] + rng.normal(0, PROMPT_SD, draws) - rng.normal(0, PROMPT_SD, draws)
        pa, pb, _ = davidson(d)
        rates.append(1 - (1 - q) ** 2 - q * (1 - q) * (pa + pb))
    return float(np.mean(rates))


def simulate(q: float, prompts: int, rng: np.random.Generator) -> pd.DataFrame:
    """The judge's verdicts, one row per order of each pair (the frame generation.selectors gives analysis)."""
    rows = []
    for p in range(prompts):
        theta = THETA + rng.normal(0, PROMPT_SD, len(THETA))
        for i, j in combinations(range(len(THETA)), 2):
            pa, pb, _ = davidson(np.array([theta[i] - theta[j]]))
            t = rng.choice(3, p=[pa[0], pb[0], 1 - pa[0] - pb[0]])  # 0: i wins, 1: j wins, 2: tie
            for left, right in ((i, j), (j, i)):
                if rng.random() < q:
                    choice = "left"
                elif t == 2:
                    choice = "tie"
                else:
                    winner = i if t == 0 else j
                    choice = "left" if winner == left else "right"
                rows.append(
                    ("judge", f"p{p}", CONDITIONS[left], CONDITIONS[right], choice, False, 0, 100, 100)
                )
    return pd.DataFrame(
        rows,
        columns=[
            "judge", "prompt_id", "left_condition", "right_condition", "choice", "both_inadequate",
            "sample_index", "left_length", "right_length",
        ],
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--seed", type=int, default=39)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    out: dict = {"reps": args.reps, "prompts": args.prompts, "seed": args.seed, "by_q": {}}
    for q in QS:
        truth = population_flip_rate(q, rng)
        estimates, covered = [], []
        for _ in range(args.reps):
            line = flip_table(judge_pairs(simulate(q, args.prompts, rng))).set_index("scope").loc["all"]
            estimates.append(line["flip_rate"])
            covered.append(line["ci_low"] <= truth <= line["ci_high"])
        coverage = float(np.mean(covered))
        out["by_q"][str(q)] = {
            "population_flip_rate": round(truth, 4),
            "mean_estimate": round(float(np.mean(estimates)), 4),
            "bias": round(float(np.mean(estimates)) - truth, 4),
            "coverage_95": round(coverage, 4),
            "coverage_mc_se": round(math.sqrt(coverage * (1 - coverage) / args.reps), 4),
        }
    verdicts = simulate(0.1, args.prompts, rng)
    human = verdicts.rename(columns={"judge": "participant"}).assign(participant="h")
    timed = time.perf_counter()
    judge_pairwise_tables(
        verdicts, human, None, baseline="human", conditions=list(CONDITIONS), n_boot=200, seed=1
    )
    out["tables_seconds"] = round(time.perf_counter() - timed, 3)
    out["total_seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
