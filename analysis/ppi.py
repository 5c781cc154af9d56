"""Prediction-powered estimates of a rating study's Bad/Okay/Good shares (PPI++, power-tuned).

A share is a mean: the share of Good in a condition is the mean of Y = 1[a person rated the response Good].
Prediction-powered inference (Angelopoulos et al., Science 2023) combines n human ratings (each with the judge's
prediction f for the same response) and N responses only the judge rated:

    θ̂(λ) = λ · mean(f over the N)  +  mean(Y − λ f over the n)
    Var θ̂(λ) = λ² · var(f over the N) / N  +  var(Y − λ f over the n) / n

λ = 1 is the original PPI, λ = 0 the human-only (classical) estimate. PPI++ (Angelopoulos, Duchi & Zrnic,
arXiv 2311.01453) picks the λ that minimises the variance, λ̂ = cov(Y, f) / ((1 + n/N) · var(f)), clipped to
[0, 1]: a judge that knows nothing gets λ̂ ≈ 0 and an interval about as wide as the human-only one, never much
wider. Intervals are normal (CLT): θ̂ ± z · SE.

The judge's prediction f for a category may be a 0/1 indicator (one judge rating per response) or a share (the
fraction of the judge's samples of that response in the category); both are means, nothing else changes.

Differences from the baseline: conditions are independent samples (between subjects), so the difference's
variance is the sum of the two variances; λ is tuned in each condition on its own data (minimising each variance
minimises the sum).

Decision about `ppi-python`: NOT a dependency. The estimators above are a dozen lines of numpy/scipy, while the
package pulls numba, scikit-learn and gdown into production. The conventions are ppi-python's own (λ̂ from the
labelled covariance over n and the judge's variance over all n + N with ddof 1; standard deviations with ddof 0),
and tests/analysis/ppi_reference.json pins figures produced by ppi_py 0.2.3 (`ppi_mean_ci`,
`ppi_mean_pointestimate`, `classical_mean_ci`) on fixed arrays, which the tests hold these functions to.

Clustering. The labelled ratings come from participants who each rate several responses, and their ratings are
not independent. Given `clusters` (the rater of each labelled rating), the labelled term's variance is
cluster-robust (analysis.clustered.cluster_variance_of_mean: the sandwich over raters, with G/(G − 1)); the judge's
term is not clustered (the judge rates each response on its own). The human-only interval is cluster-robust too.
Clustered intervals use Student's t: raters − 1 degrees of freedom for the human-only one, Welch–Satterthwaite
between the human term (raters − 1) and the judge's (N − 1) for PPI, and between the two sides for a difference.
Without `clusters` the functions are ppi-python's, to the digit. `ppi_share_table` passes the raters whenever the
human frame has a `rater` column. With whole participants labelled and a within-rater ICC of 0.1, the unclustered
intervals cover 0.82–0.86 instead of 0.95 in bench/inference.py's design (it measures both).

Shares of one condition. The share table tunes ONE λ per condition, for all its scale values together (the λ
minimising the sum of the values' variances: Σ_v cov(Y_v, f_v) / ((1 + n/N) · Σ_v var(f_v)), ppi-python's
multivariate choice); because Σ_v Y_v = Σ_v f_v = 1 for every response, the PPI shares of a condition then sum to
exactly 1. (A λ per value, as `ppi_mean` alone tunes it, makes them sum to 0.99–1.01.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm
from scipy.stats import t as student_t

from analysis.clustered import cluster_variance_of_mean


@dataclass(frozen=True)
class MeanEstimate:
    estimate: float
    se: float
    ci_low: float
    ci_high: float
    lam: float  # 0 for the human-only estimate
    df: float = np.inf  # the interval's reference: normal (inf) or Student's t with the raters' df

    @property
    def width(self) -> float:
        return self.ci_high - self.ci_low


def _z(level: float, df: float = np.inf) -> float:
    """The two-sided quantile: normal, or Student's t with `df` degrees of freedom when finite."""
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")
    if np.isfinite(df):
        return float(student_t.ppf(1 - (1 - level) / 2, df))
    return float(norm.ppf(1 - (1 - level) / 2))


def _raters_df(clusters) -> float:
    """Degrees of freedom of a cluster-robust interval: raters − 1 (inf without clusters)."""
    return np.inf if clusters is None else float(np.unique(np.asarray(clusters)).size - 1)


def _arrays(y, f, f_unlabelled) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y, f, fu = (np.asarray(a, dtype=float).ravel() for a in (y, f, f_unlabelled))
    if y.shape != f.shape:
        raise ValueError(f"{y.size} human labels but {f.size} judge predictions on them")
    if y.size < 2 or fu.size < 1:
        raise ValueError("needs at least two labelled and one unlabelled response")
    return y, f, fu


def power_tuned_lambda(y, f, f_unlabelled) -> float:
    """PPI++'s λ̂ for a mean, clipped to [0, 1] (ppi-python's `_calc_lam_glm` for the mean)."""
    y, f, fu = _arrays(y, f, f_unlabelled)
    n, big_n = y.size, fu.size
    cov = float(np.mean((y - y.mean()) * (f - f.mean())))
    var = float(np.var(np.concatenate([f, fu]), ddof=1))
    if var == 0:
        return 0.0  # a constant judge carries no information
    return float(np.clip(cov / ((1 + n / big_n) * var), 0.0, 1.0))


def shared_lambda(ys, fs, fus) -> float:
    """One PPI++ λ for several means estimated together (the scale values of one condition): the λ minimising the
    sum of their variances, Σ cov(Y_v, f_v) / ((1 + n/N) · Σ var(f_v)), clipped to [0, 1] (module doc)."""
    covariance = variance = 0.0
    n = big_n = 0
    for y, f, fu in zip(ys, fs, fus, strict=True):
        y, f, fu = _arrays(y, f, fu)
        n, big_n = y.size, fu.size
        covariance += float(np.mean((y - y.mean()) * (f - f.mean())))
        variance += float(np.var(np.concatenate([f, fu]), ddof=1))
    if variance == 0:
        return 0.0
    return float(np.clip(covariance / ((1 + n / big_n) * variance), 0.0, 1.0))


def _labelled_variance(z: np.ndarray, clusters) -> float:
    """Variance of the mean of the labelled term: ppi-python's (ddof 0) or cluster-robust over raters."""
    if clusters is None:
        return float(np.var(z) / z.size)
    clusters = np.asarray(clusters).ravel()
    if clusters.size != z.size:
        raise ValueError(f"{z.size} labelled ratings but {clusters.size} rater labels")
    variance = cluster_variance_of_mean(z, clusters)
    if not np.isfinite(variance):
        raise ValueError("a cluster-robust variance needs ratings from at least two raters")
    return variance


def ppi_mean(
    y, f, f_unlabelled, *, level: float = 0.95, lam: float | None = None, clusters=None
) -> MeanEstimate:
    """Prediction-powered estimate and CI of E[Y]; λ power-tuned unless given; `clusters`: the rater of each
    labelled rating (module doc)."""
    y, f, fu = _arrays(y, f, f_unlabelled)
    if lam is None:
        lam = power_tuned_lambda(y, f, fu)
    estimate = float(lam * fu.mean() + np.mean(y - lam * f))
    judge_part = float(np.var(lam * fu) / fu.size)
    human_part = _labelled_variance(y - lam * f, clusters)
    se = float(np.sqrt(judge_part + human_part))
    # With clusters: Welch–Satterthwaite between the human term (raters − 1) and the judge's (many responses).
    df = _raters_df(clusters)
    if np.isfinite(df) and se > 0:
        df = (judge_part + human_part) ** 2 / (human_part**2 / df + judge_part**2 / max(fu.size - 1, 1))
    z = _z(level, df)
    return MeanEstimate(estimate, se, estimate - z * se, estimate + z * se, float(lam), df)


def classical_mean(y, *, level: float = 0.95, clusters=None) -> MeanEstimate:
    """Human-only estimate and CLT interval of E[Y] (the same conventions as `ppi_mean`, λ = 0)."""
    y = np.asarray(y, dtype=float).ravel()
    if y.size < 2:
        raise ValueError("needs at least two labelled responses")
    estimate, se = float(y.mean()), float(np.sqrt(_labelled_variance(y, clusters)))
    df = _raters_df(clusters)
    z = _z(level, df)
    return MeanEstimate(estimate, se, estimate - z * se, estimate + z * se, 0.0, df)


def difference(a: MeanEstimate, b: MeanEstimate, *, level: float = 0.95) -> MeanEstimate:
    """a − b for independent samples; `lam` is NaN (each side has its own). Normal when both sides are; otherwise
    Student's t with Welch–Satterthwaite degrees of freedom."""
    estimate = a.estimate - b.estimate
    se = float(np.hypot(a.se, b.se))
    df = np.inf
    if (np.isfinite(a.df) or np.isfinite(b.df)) and se > 0:
        df = se**4 / (a.se**4 / a.df + b.se**4 / b.df)
    z = _z(level, df)
    return MeanEstimate(estimate, se, estimate - z * se, estimate + z * se, float("nan"), df)


def variance_factor(rho: float, n: float, big_n: float | None) -> float:
    """Var(PPI++ at the optimal λ) / Var(human-only) for the same n: 1 − ρ² · N / (N + n), where ρ is the
    correlation of Y and f (ρ² N/(N+n) is the share of human ratings a calibrated judge saves at equal width).
    big_n None: an unlimited number of judge ratings (only the ratio N/n matters)."""
    if not -1 <= rho <= 1:
        raise ValueError(f"a correlation must be in [-1, 1], got {rho}")
    share = 1.0 if big_n is None else big_n / (big_n + n)
    return 1.0 - rho * rho * share


# --- DataFrames of a study ----------------------------------------------------------------------------------


def _judge_predictions(judge: pd.DataFrame, values: list[int]) -> pd.DataFrame:
    """Per response: its condition and, per scale value, the share of the judge's samples with that value."""
    missing = {"response_id", "condition", "value"} - set(judge.columns)
    if missing:
        raise ValueError(f"judge ratings need columns {sorted(missing)}")
    unknown = sorted(set(judge["value"]) - set(values))
    if unknown:
        raise ValueError(f"judge ratings with values {unknown} are not on the scale {values}")
    conditions = judge.groupby("response_id")["condition"].nunique()
    if (conditions > 1).any():
        raise ValueError("a response has judge ratings under two conditions")
    shares = pd.crosstab(judge["response_id"], judge["value"], normalize="index")
    shares = shares.reindex(columns=values, fill_value=0.0)
    shares["condition"] = judge.groupby("response_id")["condition"].first()
    return shares


def ppi_share_table(
    *,
    human: pd.DataFrame,
    judge: pd.DataFrame,
    values: list[int],
    labels: list[str] | None = None,
    baseline: str,
    level: float = 0.95,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each condition's share of each scale value, human-only and prediction-powered, and each condition's
    difference from the baseline (both ways), from plain DataFrames.

    human: one row per human rating (response_id, condition, value). judge: one row per judge rating
    (response_id, condition, value; several samples of one response allowed). Labelled = human ratings of
    responses the judge rated; unlabelled = responses the judge rated that no person rated. Human ratings of
    responses the judge did not rate count in the human-only estimate only.

    With a `rater` column in `human`, every interval is cluster-robust over raters (module doc).

    Returns (shares, differences). Judge ratings never enter the human-only columns.
    """
    labels = labels or [str(v) for v in values]
    missing = {"response_id", "condition", "value"} - set(human.columns)
    if missing:
        raise ValueError(f"human ratings need columns {sorted(missing)}")
    predictions = _judge_predictions(judge, values)
    share_lines, estimates = [], {}
    for condition in sorted(set(human["condition"]) | set(predictions["condition"]), key=str):
        rated = human[human["condition"] == condition]
        judged = predictions[predictions["condition"] == condition]
        labelled = rated[rated["response_id"].isin(judged.index)]
        unlabelled = judged[~judged.index.isin(rated["response_id"])]
        f_labelled = judged.reindex(labelled["response_id"])
        clustered = "rater" in human.columns
        raters, labelled_raters = (
            (rated["rater"].to_numpy(), labelled["rater"].to_numpy()) if clustered else (None, None)
        )
        can_cluster = not clustered or labelled["rater"].nunique() >= 2
        usable_ppi = len(labelled) >= 2 and len(unlabelled) >= 1 and can_cluster
        lam = None
        if usable_ppi:
            lam = shared_lambda(
                [(labelled["value"] == v).to_numpy() for v in values],
                [f_labelled[v].to_numpy() for v in values],
                [unlabelled[v].to_numpy() for v in values],
            )
        for value, label in zip(values, labels, strict=True):
            line = {"condition": condition, "value": label, "n_human": len(rated), "n": len(labelled)}
            line["N"] = len(unlabelled)
            classical = ppi = None
            if len(rated) >= 2 and (not clustered or rated["rater"].nunique() >= 2):
                classical = classical_mean((rated["value"] == value).to_numpy(), clusters=raters)
            if usable_ppi:
                y = (labelled["value"] == value).to_numpy()
                ppi = ppi_mean(
                    y,
                    f_labelled[value].to_numpy(),
                    unlabelled[value].to_numpy(),
                    level=level,
                    lam=lam,
                    clusters=labelled_raters,
                )
            estimates[(condition, label)] = (classical, ppi)
            share_lines.append({**line, **_columns("human", classical), **_columns("ppi", ppi)})
            usable = ppi and classical and classical.width > 0
            share_lines[-1]["width_ratio"] = ppi.width / classical.width if usable else np.nan
    diff_lines = []
    for (condition, label), (classical, ppi) in estimates.items():
        if condition == baseline or (baseline, label) not in estimates:
            continue
        base_classical, base_ppi = estimates[(baseline, label)]
        both = classical and base_classical
        diff_lines.append(
            {
                "condition": condition,
                "baseline": baseline,
                "value": label,
                **_columns("human", difference(classical, base_classical, level=level) if both else None),
                **_columns("ppi", difference(ppi, base_ppi, level=level) if ppi and base_ppi else None),
            }
        )
    return pd.DataFrame(share_lines), pd.DataFrame(diff_lines)


def _columns(prefix: str, estimate: MeanEstimate | None) -> dict[str, float]:
    names = ("estimate", "ci_low", "ci_high", "se") + (("lambda",) if prefix == "ppi" else ())
    if estimate is None:
        return {f"{prefix}_{name}": np.nan for name in names}
    out = {
        f"{prefix}_estimate": estimate.estimate,
        f"{prefix}_ci_low": estimate.ci_low,
        f"{prefix}_ci_high": estimate.ci_high,
        f"{prefix}_se": estimate.se,
    }
    if prefix == "ppi":
        out["ppi_lambda"] = estimate.lam
    return out
