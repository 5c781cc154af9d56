"""An LLM judge of a pairwise study: its verdicts in both orders, the flips, and its calibration against people.

Pure functions over frames (no Django, like analysis/bradley_terry.py); `judge_pairwise_tables` is what the pairwise
analysis writes for each judge (analysis/pairwise.py: `judge_pairwise.csv`, `judge_flips.csv`,
`judge_calibration.csv`, `judge_bt_scores.csv`).

The judge's frame (generation.selectors.judge_verdicts_frame) has the human frame's columns (docs/pairwise.md) with
`judge` for `participant` and a `sample_index`: one row per order of a pair (the reply shown as A is `left`).

* **A pair's verdicts.** For a prompt and two conditions a < b (by name), `verdict_ab` is the judge's answer when
  a's reply was shown as A, `verdict_ba` when b's was, both in condition terms: `a`, `b` or `tie`. The pair
  **flips** when the two differ (a judge that follows the position more than the replies); it **reverses** when one
  says a and the other b (the strongest flip). A pair with one order answered so far is left out of everything.
* **The order-consistent verdict** is the common verdict when the two orders agree, and `tie` when they flip: a
  win counts only when the judge prefers the same reply whichever side it is on (the conservative rule of MT-Bench's
  judge, Zheng et al. 2023). With several samples, sample 0's verdicts are used.
* **Flip rate**: flipped pairs / pairs with both orders, overall and per condition pair, with a 95 % normal interval
  clustered by prompt (analysis/clustered.py).
* **Calibration**: the people's majority per (prompt, a, b) among their votes — the one outcome with the most
  votes; a prompt-pair whose top outcomes tie has no majority and is left out (counted in `no_majority`) — against
  the judge's order-consistent verdict. Percent agreement and Cohen's κ (three categories a / b / tie, chance from
  the two marginals) with 95 % percentile intervals from a bootstrap resampling prompts (a prompt's pairs move
  together), overall and per condition pair.
* **Strengths**: the judge's votes (both orders, sample 0) fitted by the same Davidson model as people's
  (`bradley_terry.davidson_fit`, baseline 0), its interval from a bootstrap resampling prompts (the judge is one
  rater): θ̂ ± t·SE on prompts − 1 degrees of freedom, SE from the bounded replicates × G/(G − 1), as the humans'
  prompt part; beside the people's strengths.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from analysis.clustered import clustered_mean

from . import bradley_terry
from .bradley_terry_bootstrap import _cluster_variance

OUTCOMES = ("a", "b", "tie")
CALIBRATION_BOOTSTRAP = 1000


def _outcomes(frame: pd.DataFrame) -> pd.DataFrame:
    """Each vote in condition terms: `condition_a` < `condition_b` by name, `outcome` a / b / tie, `a_left`."""
    a = frame[["left_condition", "right_condition"]].min(axis=1)
    b = frame[["left_condition", "right_condition"]].max(axis=1)
    winner = np.where(
        frame["choice"] == "left",
        frame["left_condition"],
        np.where(frame["choice"] == "right", frame["right_condition"], ""),
    )
    outcome = np.where(winner == "", "tie", np.where(winner == a, "a", "b"))
    return frame.assign(
        condition_a=a, condition_b=b, outcome=outcome, a_left=(frame["left_condition"] == a).to_numpy()
    )


PAIR_COLUMNS = [
    "judge", "prompt_id", "condition_a", "condition_b", "sample_index", "verdict_ab", "verdict_ba", "flipped",
    "reversed", "verdict", "both_inadequate",
]  # fmt: skip


def judge_pairs(verdicts: pd.DataFrame) -> pd.DataFrame:
    """One row per (judge, prompt, condition pair, sample) answered in both orders (`PAIR_COLUMNS`; module doc)."""
    if verdicts.empty:
        return pd.DataFrame(columns=PAIR_COLUMNS)
    votes = _outcomes(verdicts)
    keys = ["judge", "prompt_id", "condition_a", "condition_b", "sample_index"]
    ab = votes[votes["a_left"]].drop_duplicates(keys).set_index(keys)
    ba = votes[~votes["a_left"]].drop_duplicates(keys).set_index(keys)
    both = ab[["outcome", "both_inadequate"]].merge(
        ba[["outcome", "both_inadequate"]], left_index=True, right_index=True, suffixes=("_ab", "_ba")
    )
    out = pd.DataFrame(
        {
            "verdict_ab": both["outcome_ab"],
            "verdict_ba": both["outcome_ba"],
            "flipped": both["outcome_ab"] != both["outcome_ba"],
            "reversed": (both["outcome_ab"] != "tie")
            & (both["outcome_ba"] != "tie")
            & (both["outcome_ab"] != both["outcome_ba"]),
            "both_inadequate": both["both_inadequate_ab"].astype(bool)
            & both["both_inadequate_ba"].astype(bool),
        },
        index=both.index,
    )
    out["verdict"] = out["verdict_ab"].where(~out["flipped"], "tie")
    return out.reset_index()[PAIR_COLUMNS].sort_values(keys, kind="stable").reset_index(drop=True)


def _scopes(frame: pd.DataFrame):
    """("all", frame), then ("a vs b", rows of that condition pair) for each pair, by name."""
    yield "all", frame
    for (a, b), group in frame.groupby(["condition_a", "condition_b"], sort=True):
        yield f"{a} vs {b}", group


FLIP_COLUMNS = [
    "judge", "scope", "pairs", "flips", "reversals", "flip_rate", "reversal_rate", "ci_low", "ci_high",
]  # fmt: skip
CALIBRATION_COLUMNS = [
    "judge", "scope", "pairs", "no_majority", "agreement", "agreement_low", "agreement_high", "kappa", "kappa_low",
    "kappa_high",
]  # fmt: skip


def flip_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per judge and scope (all pairs, then each condition pair): pairs answered in both orders, flips, reversals,
    the flip rate and its 95 % interval clustered by prompt (sample 0)."""
    lines = []
    for judge, mine in pairs[pairs["sample_index"] == 0].groupby("judge", sort=True):
        for scope, group in _scopes(mine):
            line = {
                "judge": judge,
                "scope": scope,
                "pairs": len(group),
                "flips": int(group["flipped"].sum()),
                "reversals": int(group["reversed"].sum()),
                "flip_rate": float(group["flipped"].mean()),
                "reversal_rate": float(group["reversed"].mean()),
                "ci_low": math.nan,
                "ci_high": math.nan,
            }
            if len(group) >= 2:
                estimate = clustered_mean(group["flipped"].astype(float), group["prompt_id"].astype(str))
                line["ci_low"], line["ci_high"] = max(estimate.ci_low, 0.0), min(estimate.ci_high, 1.0)
            lines.append(line)
    return pd.DataFrame(lines, columns=FLIP_COLUMNS)


def human_majority(human: pd.DataFrame) -> pd.DataFrame:
    """The people's majority outcome per (prompt, condition pair): prompt_id, condition_a, condition_b, votes,
    majority (a / b / tie, or "" when the top outcomes tie)."""
    columns = ["prompt_id", "condition_a", "condition_b", "votes", "majority"]
    if human.empty:
        return pd.DataFrame(columns=columns)
    votes = _outcomes(human)
    counts = (
        votes.groupby(["prompt_id", "condition_a", "condition_b", "outcome"]).size().unstack(fill_value=0)
    )
    counts = counts.reindex(columns=list(OUTCOMES), fill_value=0)
    top = counts.max(axis=1)
    unique = (counts.eq(top, axis=0)).sum(axis=1) == 1
    majority = counts.idxmax(axis=1).where(unique, "")
    return pd.DataFrame({"votes": counts.sum(axis=1), "majority": majority}).reset_index()[columns]


def agreement(judge: np.ndarray, human: np.ndarray) -> tuple[float, float]:
    """(percent agreement, Cohen's κ) of two labellings over OUTCOMES; κ is nan when chance agreement is 1."""
    judge, human = np.asarray(judge), np.asarray(human)
    observed = float((judge == human).mean())
    chance = float(sum((judge == o).mean() * (human == o).mean() for o in OUTCOMES))
    kappa = (observed - chance) / (1 - chance) if chance < 1 else math.nan
    return observed, kappa


def calibration_table(
    pairs: pd.DataFrame, human: pd.DataFrame, *, n_boot: int = CALIBRATION_BOOTSTRAP, seed: int = 0
) -> pd.DataFrame:
    """Per judge and scope: the judge's order-consistent verdicts (sample 0) against the people's majority on the
    same prompt and pair (module doc), with bootstrap intervals resampling prompts."""
    majority = human_majority(human)
    keys = ["prompt_id", "condition_a", "condition_b"]
    lines = []
    for judge, mine in pairs[pairs["sample_index"] == 0].groupby("judge", sort=True):
        joined = mine.merge(majority, on=keys, how="inner")
        for scope, group in _scopes(joined):
            decided = group[group["majority"] != ""]
            line = {
                "judge": judge,
                "scope": scope,
                "pairs": len(decided),
                "no_majority": int((group["majority"] == "").sum()),
                "agreement": math.nan,
                "agreement_low": math.nan,
                "agreement_high": math.nan,
                "kappa": math.nan,
                "kappa_low": math.nan,
                "kappa_high": math.nan,
            }
            if len(decided):
                line["agreement"], line["kappa"] = agreement(decided["verdict"], decided["majority"])
                low_high = _bootstrap(decided, n_boot=n_boot, seed=seed)
                line.update(low_high)
            lines.append(line)
    return pd.DataFrame(lines, columns=CALIBRATION_COLUMNS)


def _bootstrap(decided: pd.DataFrame, *, n_boot: int, seed: int) -> dict:
    """95 % percentile intervals of the agreement and κ, resampling prompts."""
    rng = np.random.default_rng(seed)
    codes, prompts = pd.factorize(decided["prompt_id"])
    by_prompt = [np.flatnonzero(codes == i) for i in range(len(prompts))]
    verdict, majority = decided["verdict"].to_numpy(), decided["majority"].to_numpy()
    draws = []
    for _ in range(n_boot):
        rows = np.concatenate([by_prompt[i] for i in rng.integers(0, len(prompts), len(prompts))])
        draws.append(agreement(verdict[rows], majority[rows]))
    draws = np.array(draws)
    out = {}
    for column, name in ((0, "agreement"), (1, "kappa")):
        values = draws[:, column][~np.isnan(draws[:, column])]
        if values.size:
            out[f"{name}_low"], out[f"{name}_high"] = (float(v) for v in np.percentile(values, [2.5, 97.5]))
    return out


def judge_strengths(
    verdicts: pd.DataFrame, *, baseline: str, conditions: list[str], n_boot: int, seed: int
) -> pd.DataFrame:
    """The judge's Davidson log-strengths (baseline 0) from its votes in both orders (sample 0), with an interval
    from a bootstrap resampling prompts (module doc). Columns: condition, strength, ci_low, ci_high."""
    frame = verdicts[verdicts["sample_index"] == 0].rename(columns={"judge": "participant"})
    frame = frame.assign(
        both_inadequate=frame["both_inadequate"].astype(bool), response_time_ms=0, position=0
    )
    votes = bradley_terry.votes_from_frame(frame, conditions)
    fit = bradley_terry.davidson_fit(votes, baseline=baseline)
    replicates, bounded = bradley_terry.bootstrap_replicates(
        votes, fit, unit="prompt", n_boot=n_boot, rng=np.random.default_rng(seed)
    )
    prompts = int(votes.prompt.max()) + 1
    variance = _cluster_variance(replicates, bounded, prompts)
    quantile = float(student_t.ppf(0.975, max(prompts - 1, 1)))
    lines = []
    for i, condition in enumerate(votes.conditions):
        strength = fit.strengths[condition]
        se = math.sqrt(variance[i]) if variance[i] == variance[i] else math.nan
        lines.append((condition, strength, strength - quantile * se, strength + quantile * se))
    return pd.DataFrame(lines, columns=["condition", "strength", "ci_low", "ci_high"])


def judge_pairwise_tables(
    verdicts: pd.DataFrame,
    human: pd.DataFrame,
    human_scores: pd.DataFrame | None,
    *,
    baseline: str,
    conditions: list[str],
    n_boot: int,
    seed: int,
) -> dict[str, pd.DataFrame]:
    """The judge's tables, by file name: the pairs (`judge_pairwise`), the flips (`judge_flips`), the calibration
    against people (`judge_calibration`) and, where the judge's votes identify every strength, its strengths
    beside the people's (`judge_bt_scores`: condition, then judge_ and human_ strength and interval).
    `verdicts` may hold several judges (judge_bt_scores has a `judge` column)."""
    pairs = judge_pairs(verdicts)
    tables = {
        "judge_pairwise": pairs,
        "judge_flips": flip_table(pairs),
        "judge_calibration": calibration_table(pairs, human, seed=seed),
    }
    scores = []
    for judge, mine in verdicts.groupby("judge", sort=True):
        try:
            strengths = judge_strengths(
                mine, baseline=baseline, conditions=conditions, n_boot=n_boot, seed=seed
            )
        except (bradley_terry.BradleyTerryError, ValueError) as exc:
            scores.append(pd.DataFrame([{"judge": judge, "note": str(exc)}]))
            continue
        strengths = strengths.rename(columns=lambda c: c if c == "condition" else f"judge_{c}")
        if human_scores is not None:
            people = human_scores[["condition", "strength", "ci_low", "ci_high"]]
            strengths = strengths.merge(
                people.rename(columns=lambda c: c if c == "condition" else f"human_{c}"),
                on="condition",
                how="left",
            )
        scores.append(strengths.assign(judge=judge))
    if scores:
        table = pd.concat(scores, ignore_index=True)
        tables["judge_bt_scores"] = table[["judge", *[c for c in table.columns if c != "judge"]]]
    return tables
