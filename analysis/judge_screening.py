"""Screening with a calibrated judge: conditions people have not (or barely) rated, ranked by the judge, with
bias-corrected ("PPI-ready") shares and the human ratings PPI would need. Pure functions over DataFrames; the
conventions are in analysis/judge_report.py's module doc."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from analysis import power, stats
from analysis.clustered import design_effect

SCREEN_MAX_HUMAN = 30  # fewer counted human ratings than this: a condition people have "barely" rated
SCREEN_BOOTSTRAP = 2000
SCREEN_POWER = 0.8


def judge_per_response(judge: pd.DataFrame) -> pd.DataFrame:
    """One judge value per response (the lower median of its samples): response_id, value."""
    if judge.empty:
        return pd.DataFrame({"response_id": pd.Series(dtype=object), "value": pd.Series(dtype="int64")})
    ordered = judge.sort_values(["response_id", "value"])
    sizes = ordered.groupby("response_id", sort=False)["value"].transform("size")
    rank = ordered.groupby("response_id", sort=False).cumcount()
    lower_median = ordered[rank == (sizes - 1) // 2]
    return lower_median[["response_id", "value"]].reset_index(drop=True)


def corrected_shares(
    judge_counts: np.ndarray, confusion: np.ndarray, *, b: int, seed: int, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, ci_low, ci_high) of the human shares p implied by the judge's counts in a condition (length K,
    judge values) and the calibration's human × judge confusion (K × K).

    The judge's shares are q = p · M with M[v, u] = P(judge = u | human = v), the misclassification matrix measured
    on the calibrated pairs; so p = q · M⁻¹ (the Moore–Penrose inverse when M is singular), clipped at 0 and
    renormalised when sampling noise makes a share negative. M is a property of the judge alone, so this holds
    wherever the judge errs as it did in calibration, whatever the condition's own shares. (Weighting q by
    P(human | judge) instead, as this once did, carries the calibration set's shares into the answer: an 80 %-correct
    judge then puts a condition whose true Good share is 0.80 at 0.69.) A human value never seen in calibration
    is assumed rated correctly (its row of M is the identity's)."""
    judge_counts = np.asarray(judge_counts, float)
    confusion = np.asarray(confusion, float)
    k = judge_counts.size
    m = judge_counts.sum()
    if m <= 0:
        nan = np.full(k, np.nan)
        return nan, nan, nan

    def invert(q: np.ndarray, conf: np.ndarray) -> np.ndarray:
        rows = conf.sum(axis=-1, keepdims=True)  # … × K × 1: pairs per human value
        given = np.where(rows > 0, conf / np.where(rows > 0, rows, 1), np.eye(k))  # P(judge = u | human = v)
        p = np.einsum("...u,...uv->...v", q, np.linalg.pinv(given))
        p = np.clip(p, 0.0, None)
        return p / p.sum(axis=-1, keepdims=True)

    estimate = invert(judge_counts / m, confusion)
    rng = np.random.default_rng(seed)
    q_star = rng.multinomial(int(m), judge_counts / m, size=b) / m
    row = confusion.sum(axis=1)
    conf_star = np.zeros((b, k, k))
    for v in range(k):
        if row[v] > 0:
            conf_star[:, v, :] = rng.multinomial(int(row[v]), confusion[v] / row[v], size=b)
    reps = invert(q_star, conf_star)
    low, high = np.quantile(reps, [(1 - level) / 2, 1 - (1 - level) / 2], axis=0)
    return estimate, low, high


def _share_ci(per_response: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and CLT interval of per-response shares (the same conventions as analysis.ppi.classical_mean)."""
    n = per_response.size
    if n == 0:
        return np.nan, np.nan, np.nan
    mean = float(per_response.mean())
    half = float(norm.ppf(1 - (1 - level) / 2) * per_response.std() / math.sqrt(n)) if n > 1 else np.nan
    return mean, mean - half, mean + half


def screening_table(
    *,
    human: pd.DataFrame,
    judge: pd.DataFrame,
    scale: stats.Scale,
    baseline: str,
    confusion: np.ndarray | None,
    correlations: dict[int, float] | None,
    items_per_participant: int,
    alpha: float = power.DEFAULT_ALPHA,
    b: int = SCREEN_BOOTSTRAP,
    seed: int = 0,
) -> tuple[pd.DataFrame, list[str]]:
    """Conditions the judge rated that people have not (or barely: < SCREEN_MAX_HUMAN counted ratings), ranked by
    the judge's top share; with the bias-corrected shares and the human ratings the planned 2×2 test (Yates, vs
    the baseline, Holm's first step) needs at 80 % power without and with the judge (module doc). Plus notes."""
    notes: list[str] = []
    if judge.empty:
        return pd.DataFrame(), notes
    values, labels, top = list(scale.values), list(scale.labels), scale.labels[-1]
    per = pd.crosstab(judge["response_id"], judge["value"], normalize="index").reindex(
        columns=values, fill_value=0.0
    )
    per["condition"] = judge.groupby("response_id")["condition"].first()
    single = judge_per_response(judge).merge(per[["condition"]], left_on="response_id", right_index=True)
    human_n = human.groupby("condition").size()
    human_shares = {
        str(c): (row / row.sum()).tolist()
        for c, row in stats.counts_table(human, scale, ["condition"]).iterrows()
        if row.sum() >= SCREEN_MAX_HUMAN
    }
    screened = sorted(c for c in per["condition"].unique() if human_n.get(c, 0) < SCREEN_MAX_HUMAN)
    if not screened:
        return pd.DataFrame(), notes
    lines = []
    for i, condition in enumerate(screened):
        mine = per[per["condition"] == condition]
        counts = (
            single[single["condition"] == condition]["value"].value_counts().reindex(values, fill_value=0)
        )
        good, good_low, good_high = _share_ci(mine[values[-1]].to_numpy())
        line: dict[str, Any] = {
            "condition": condition,
            "responses_judged": len(mine),
            "human_ratings": int(human_n.get(condition, 0)),
        }
        for v, label in zip(values, labels, strict=True):
            line[f"judge_{label}"] = float(mine[v].mean())
        line.update({f"judge_{top}_ci_low": good_low, f"judge_{top}_ci_high": good_high})
        if confusion is not None:
            est, low, high = corrected_shares(counts.to_numpy(), confusion, b=b, seed=seed + i)
            for j, label in enumerate(labels):
                line[f"corrected_{label}"] = float(est[j])
            line.update(
                {f"corrected_{top}_ci_low": float(low[-1]), f"corrected_{top}_ci_high": float(high[-1])}
            )
        lines.append(line)
    table = pd.DataFrame(lines).sort_values(f"judge_{top}", ascending=False, kind="stable")
    table.insert(0, "rank", range(1, len(table) + 1))
    power_notes = _screening_power(
        table,
        human_shares,
        scale,
        baseline,
        correlations,
        items_per_participant,
        alpha,
        confusion is not None,
        _baseline_icc(human, baseline, scale),
    )
    return table.reset_index(drop=True), notes + power_notes


def _screening_power(
    table, human_shares, scale, baseline, correlations, items, alpha, corrected, icc
) -> list[str]:
    """Adds the 80 %-power human ratings (without / with the judge) to `table` in place; returns notes."""
    labels = list(scale.labels)
    for column in ("human_ratings_needed", "ppi_ratings_needed", "ppi_participants_needed", "judge_ratio"):
        table[column] = np.nan
    if not corrected:
        return ["no calibration: the human ratings PPI would need are not estimated"]
    base = human_shares.get(baseline)
    source = f"the baseline's observed shares ({baseline})"
    if base is None:
        if len(labels) != len(power.SEED_SHARES[power.SEED_BASELINE]):
            return [f"{baseline} has too few human ratings for the power of the screened conditions"]
        base, source = list(power.SEED_SHARES[power.SEED_BASELINE]), "the seed study's published human shares"
    shares = {baseline: base}
    shares.update({c: s for c, s in human_shares.items() if c != baseline})
    for _, line in table.iterrows():
        shares[line["condition"]] = [line[f"corrected_{label}"] for label in labels]
    rho = {i: (r if np.isfinite(r) else 0.0) for i, r in enumerate((correlations or {}).values())}
    deff = design_effect(icc, items) if icc is not None else 1.0
    try:
        plain = power.power_plan(
            baseline=baseline, shares=shares, alpha=alpha, powers=(SCREEN_POWER,), design_effect=deff
        )
    except power.PowerError as exc:
        return [f"power not computed: {exc}"]
    needed = {ln.condition: ln.ratings_per_condition for ln in plain if ln.test == power.TEST_2X2_YATES}
    for idx, line in table.iterrows():
        n0 = needed.get(line["condition"])
        if n0 is None:
            continue
        ratio = max(line["responses_judged"] - n0, 0) / n0
        with_judge = power.power_plan(
            baseline=baseline,
            shares=shares,
            alpha=alpha,
            powers=(SCREEN_POWER,),
            items_per_participant=items,
            design_effect=deff,
            judge_correlation=rho,
            judge_ratio=ratio,
        )
        mine = next(
            ln for ln in with_judge if ln.condition == line["condition"] and ln.test == power.TEST_2X2_YATES
        )
        table.loc[
            idx, ["human_ratings_needed", "ppi_ratings_needed", "ppi_participants_needed", "judge_ratio"]
        ] = [
            n0,
            mine.ppi_ratings_per_condition,
            mine.ppi_participants_per_condition,
            ratio,
        ]
    return [
        f"ratings needed: the 2×2 {scale.top_label}-vs-rest test (Yates) against {baseline} at "
        f"{int(SCREEN_POWER * 100)} % power, α {alpha:g} with Holm's first step; expected shares: {source} and "
        f"each screened condition's corrected shares; design effect {deff:.2f} "
        + (
            f"(the baseline's within-rater ICC {icc:.3f})"
            if icc is not None
            else "(no ICC: ratings independent)"
        )
    ]


def _baseline_icc(human: pd.DataFrame, baseline: str, scale: stats.Scale) -> float | None:
    """The baseline's within-rater ICC of the top value (analysis.power.baseline_icc), None when not estimable."""
    if "rater" not in human.columns:
        return None
    mine = human[human["condition"] == baseline]
    icc = power.baseline_icc(mine["value"], mine["rater"], scale.top)
    return icc if np.isfinite(icc) else None
