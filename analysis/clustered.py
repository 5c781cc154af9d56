"""Inference for ratings that come in clusters: each participant gives several ratings, and they are not
independent (a generous rater is generous ten times). Plain numpy on arrays, so the analysis, the judge's report,
the drift test, the power plan and bench/inference.py all call the same functions.

Definitions
-----------
* ICC (`icc_anova`): the one-way ANOVA estimator of the intraclass correlation of a 0/1 (or numeric) rating within
  clusters, for unequal cluster sizes: (MSB − MSW) / (MSB + (m₀ − 1)·MSW), m₀ = (N − Σ n_g² / N) / (G − 1),
  clipped to [0, 1]. NaN with fewer than two clusters or no cluster of two ratings.
* Design effect (`design_effect`): 1 + (m − 1)·ICC for clusters of m ratings: how many times the variance of a share
  exceeds the variance of the same number of independent ratings.
* Cluster-robust mean (`clustered_mean`): the share (mean) of all ratings with the sandwich ("CR1") standard error
  sqrt(G/(G − 1) · Σ_g (Σ_{i∈g} (y_i − ȳ))²) / N: what GEE with an independence working correlation and robust
  covariance gives for a mean, with the usual small-sample factor G/(G − 1). Singletons give back the textbook
  standard error with ddof 1.
* The primary comparison (`clustered_difference`): the difference of two independent groups' shares (a condition
  and the baseline: different participants) with the two cluster-robust variances added, a Wald z-test and a
  normal interval. `tests/analysis/test_clustered.py` holds it to statsmodels' GEE.
* Two-way clustering (`twoway_clustered_difference`): the drift test's paired comparison, where each response is
  rated on both sides and each rater rates several responses (module doc of kinds/rating/waves.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t


@dataclass(frozen=True)
class ClusteredEstimate:
    estimate: float
    se: float
    ci_low: float
    ci_high: float
    z: float  # estimate / se (against 0)
    p: float  # two-sided
    clusters: int  # the smaller side's number of clusters for a difference
    df: float = math.inf  # degrees of freedom of the reference distribution (inf: normal)


def _codes(clusters) -> np.ndarray:
    """Integer codes 0..G−1 of any cluster labels."""
    _, codes = np.unique(np.asarray(clusters), return_inverse=True)
    return codes.ravel()


def _z(level: float) -> float:
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")
    return float(norm.ppf(1 - (1 - level) / 2))


def icc_anova(y, clusters) -> float:
    """The one-way ANOVA ICC of `y` within `clusters` (module doc)."""
    y = np.asarray(y, dtype=float).ravel()
    codes = _codes(clusters)
    if y.size != codes.size:
        raise ValueError(f"{y.size} ratings but {codes.size} cluster labels")
    g = int(codes.max()) + 1 if codes.size else 0
    n = y.size
    if g < 2 or n - g < 1:
        return float("nan")
    sizes = np.bincount(codes, minlength=g).astype(float)
    sums = np.bincount(codes, weights=y, minlength=g)
    means = sums / sizes
    grand = y.mean()
    ssb = float((sizes * (means - grand) ** 2).sum())
    ssw = float(((y - means[codes]) ** 2).sum())
    msb, msw = ssb / (g - 1), ssw / (n - g)
    m0 = (n - float((sizes**2).sum()) / n) / (g - 1)
    denominator = msb + (m0 - 1) * msw
    if denominator <= 0:
        return float("nan")
    return float(np.clip((msb - msw) / denominator, 0.0, 1.0))


def design_effect(icc: float, items: float) -> float:
    """1 + (items − 1)·ICC; 1 when the ICC is unknown (NaN)."""
    if items < 1:
        raise ValueError(f"items per cluster must be at least 1, got {items}")
    if icc is None or not math.isfinite(icc):
        return 1.0
    if not 0 <= icc <= 1:
        raise ValueError(f"an ICC must be in [0, 1], got {icc}")
    return 1.0 + (items - 1) * icc


def cluster_variance_of_mean(z, clusters) -> float:
    """CR1 variance of the mean of `z` (module doc); NaN with fewer than two clusters."""
    z = np.asarray(z, dtype=float).ravel()
    codes = _codes(clusters)
    g = int(codes.max()) + 1 if codes.size else 0
    if g < 2:
        return float("nan")
    scores = np.bincount(codes, weights=z - z.mean(), minlength=g)
    return float(g / (g - 1) * (scores**2).sum() / z.size**2)


def _estimate(estimate: float, se: float, clusters: int, level: float) -> ClusteredEstimate:
    half = _z(level) * se
    z = estimate / se if se > 0 else (0.0 if estimate == 0 else math.copysign(math.inf, estimate))
    p = float(2 * norm.sf(abs(z))) if math.isfinite(se) else float("nan")
    return ClusteredEstimate(estimate, se, estimate - half, estimate + half, z, p, clusters)


def clustered_mean(y, clusters, *, level: float = 0.95) -> ClusteredEstimate:
    """The mean of `y` with its cluster-robust standard error and normal interval (module doc)."""
    y = np.asarray(y, dtype=float).ravel()
    if y.size < 2:
        raise ValueError("needs at least two ratings")
    variance = cluster_variance_of_mean(y, clusters)
    g = int(_codes(clusters).max()) + 1
    return _estimate(float(y.mean()), math.sqrt(variance) if variance == variance else math.nan, g, level)


def clustered_difference(y_a, clusters_a, y_b, clusters_b, *, level: float = 0.95) -> ClusteredEstimate:
    """mean(y_a) − mean(y_b) for two groups of different participants, cluster-robust (module doc)."""
    a = clustered_mean(y_a, clusters_a, level=level)
    b = clustered_mean(y_b, clusters_b, level=level)
    return _estimate(a.estimate - b.estimate, math.hypot(a.se, b.se), min(a.clusters, b.clusters), level)


def twoway_clustered_difference(
    y, side, response, rater, *, level: float = 0.95, small_sample: bool = True
) -> ClusteredEstimate:
    """The paired difference between `side` 1 and `side` 0 ratings of the same responses, each response weighing
    its side-1 ratings: θ = Σ_r w_r (ȳ_1(r) − ȳ_0(r)), w_r = n_1(r) / n_1, over responses rated on both sides.

    θ = Σ_i a_i y_i is linear in the ratings; its variance is estimated by two-way clustering (Cameron, Gelbach &
    Miller 2011) on raters and responses: V_rater + V_response − V_rating, scores a_i (y_i − ȳ_side), each side's
    raters' part with its own factor G/(G − 1). Raters are the independent units; clustering by response as well
    removes the response's own quality, which the paired difference cancels. With `small_sample` the interval
    and p use Student's t with Welch–Satterthwaite degrees of freedom from the two sides' parts (each side: its
    raters − 1), so a few re-raters whose ratings cluster decide, and many independent ones give the normal.
    """
    y = np.asarray(y, dtype=float).ravel()
    side = np.asarray(side, dtype=int).ravel()
    response_codes, rater_codes = _codes(response), _codes(rater)
    if not (y.size == side.size == response_codes.size == rater_codes.size):
        raise ValueError("y, side, response and rater must have the same length")
    r = int(response_codes.max()) + 1 if y.size else 0
    n1 = np.bincount(response_codes[side == 1], minlength=r).astype(float)
    n0 = np.bincount(response_codes[side == 0], minlength=r).astype(float)
    both = (n1 > 0) & (n0 > 0)
    keep = both[response_codes]
    if not keep.any():
        raise ValueError("no response is rated on both sides")
    y, side, response_codes, rater_codes = y[keep], side[keep], response_codes[keep], rater_codes[keep]
    total1 = n1[both].sum()
    a = np.where(side == 1, 1.0 / total1, -(n1 / total1 / np.where(n0 > 0, n0, 1))[response_codes])
    estimate = float((a * y).sum())
    centred = y - np.where(side == 1, y[side == 1].mean(), y[side == 0].mean())
    s = a * centred

    def sum_sq(codes, weights):
        return float((np.bincount(codes, weights=weights) ** 2).sum())

    raters = [np.unique(rater_codes[side == k]).size for k in (0, 1)]
    # Per side, the raters' part with its own small-sample factor G/(G − 1); then the response-level cross terms
    # (V_response − V_rating), which remove what the two sides' ratings of one response share.
    sides = [
        sum_sq(rater_codes[side == k], s[side == k]) * (g / (g - 1) if g > 1 else 1.0)
        for k, g in zip((0, 1), raters, strict=True)
    ]
    cross = sum_sq(response_codes, s) - float((s**2).sum())
    variance = sum(sides) + cross
    if variance <= 0:  # the usual fallback when the two-way estimate is not positive
        variance = sum(sides)
    se = math.sqrt(variance)
    g = min(raters)
    if not small_sample or g < 2:
        return _estimate(estimate, se, g, level)
    # Welch–Satterthwaite degrees of freedom of the two sides' parts, each with (its raters − 1).
    spread = sum(v * v / (k - 1) for v, k in zip(sides, raters, strict=True) if k > 1)
    df = sum(sides) ** 2 / spread if spread > 0 else math.inf
    if not math.isfinite(df):
        return _estimate(estimate, se, g, level)
    quantile = float(student_t.ppf(1 - (1 - level) / 2, df))
    t = estimate / se if se > 0 else 0.0
    p = float(2 * student_t.sf(abs(t), df))
    return ClusteredEstimate(estimate, se, estimate - quantile * se, estimate + quantile * se, t, p, g, df)
