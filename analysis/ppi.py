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

Caveat: PPI assumes the labelled ratings are a random sample of the responses and independent; ratings of one
participant are clustered (the bootstrap in analysis.stats resamples participants for that reason). With one
rating per response and ten responses per participant the design effect is small for shares, but not zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm


@dataclass(frozen=True)
class MeanEstimate:
    estimate: float
    se: float
    ci_low: float
    ci_high: float
    lam: float  # 0 for the human-only estimate

    @property
    def width(self) -> float:
        return self.ci_high - self.ci_low


def _z(level: float) -> float:
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")
    return float(norm.ppf(1 - (1 - level) / 2))


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


def ppi_mean(y, f, f_unlabelled, *, level: float = 0.95, lam: float | None = None) -> MeanEstimate:
    """Prediction-powered estimate and CI of E[Y]; λ power-tuned unless given."""
    y, f, fu = _arrays(y, f, f_unlabelled)
    if lam is None:
        lam = power_tuned_lambda(y, f, fu)
    estimate = float(lam * fu.mean() + np.mean(y - lam * f))
    se = float(np.sqrt(np.var(lam * fu) / fu.size + np.var(y - lam * f) / y.size))
    z = _z(level)
    return MeanEstimate(estimate, se, estimate - z * se, estimate + z * se, float(lam))


def classical_mean(y, *, level: float = 0.95) -> MeanEstimate:
    """Human-only estimate and CLT interval of E[Y] (the same conventions as `ppi_mean`, λ = 0)."""
    y = np.asarray(y, dtype=float).ravel()
    if y.size < 2:
        raise ValueError("needs at least two labelled responses")
    estimate, se = float(y.mean()), float(y.std() / np.sqrt(y.size))
    z = _z(level)
    return MeanEstimate(estimate, se, estimate - z * se, estimate + z * se, 0.0)


def difference(a: MeanEstimate, b: MeanEstimate, *, level: float = 0.95) -> MeanEstimate:
    """a − b for independent samples; `lam` is NaN (each side has its own)."""
    estimate = a.estimate - b.estimate
    se = float(np.hypot(a.se, b.se))
    z = _z(level)
    return MeanEstimate(estimate, se, estimate - z * se, estimate + z * se, float("nan"))


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
        for value, label in zip(values, labels, strict=True):
            line = {"condition": condition, "value": label, "n_human": len(rated), "n": len(labelled)}
            line["N"] = len(unlabelled)
            classical = ppi = None
            if len(rated) >= 2:
                classical = classical_mean((rated["value"] == value).to_numpy())
            if len(labelled) >= 2 and len(unlabelled) >= 1:
                y = (labelled["value"] == value).to_numpy()
                ppi = ppi_mean(y, f_labelled[value].to_numpy(), unlabelled[value].to_numpy(), level=level)
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
