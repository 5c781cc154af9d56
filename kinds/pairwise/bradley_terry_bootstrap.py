"""The two-way cluster bootstrap of a Davidson fit (kinds.pairwise.bradley_terry_fit; re-exported by
kinds.pairwise.bradley_terry).

Votes are clustered twice: by rater (a rater's taste and side preference) and by prompt (a prompt where one
condition's reply is unusually good). Resampling both at once (the "pigeonhole" bootstrap, weights = rater count ×
prompt count) counts the vote-level noise three times (Owen 2007): with preference votes, where that noise
dominates, its 95 % intervals cover 99 %+ (bench/pairwise.py measures it). So, as Cameron, Gelbach & Miller (2011)
do for two-way clustering, three one-way bootstraps are run — resampling raters, resampling prompts, resampling
votes — and the variance is V_rater + V_prompt − V_vote (the vote is the intersection of a rater and a prompt: a
participant sees a prompt at most once), falling back to max(V_rater, V_prompt) when that is not positive. Each
bootstrap's variance is its replicates' (ddof 1) times G/(G − 1) for its G clusters (the bootstrap's variance of
a mean over G clusters is (G − 1)/G of the unbiased one), and the interval is θ̂ ± t·√V with Student's t on
min(raters, prompts) − 1 degrees of freedom, as Cameron, Gelbach & Miller advise for few clusters. A replicate in
which some condition never won or never lost has an unbounded strength: it is fitted with a tiny ridge, counted,
and left out of the variance (the report says how many). Seeded; bench/pairwise.py reports the coverage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student_t

from .bradley_terry_fit import (
    BradleyTerryError,
    DavidsonFit,
    Votes,
    davidson_newton,
    design_of,
    identification_check,
)

BOOTSTRAP_RIDGE = 1e-6  # keeps a bootstrap replicate in which some condition never wins finite
BOOTSTRAP_UNITS = ("rater", "prompt", "vote")
BOOTSTRAP_CELLS = (
    2_000_000  # replicate weights held at once (replicates × votes): bounds the bootstrap's memory
)


def bootstrap_weights(votes: Votes, unit: str, rng: np.random.Generator, size: int) -> np.ndarray:
    """`size` bootstrap replicates' weights (size × votes), resampling `unit`: "rater", "prompt", "vote", or
    "pigeonhole" (raters and prompts at once, weight = the product; measured by bench/pairwise.py, see the module
    doc)."""

    def counts(n: int) -> np.ndarray:
        return rng.multinomial(n, np.full(n, 1 / n), size=size).astype(float)

    if unit == "rater":
        return counts(int(votes.rater.max()) + 1)[:, votes.rater]
    if unit == "prompt":
        return counts(int(votes.prompt.max()) + 1)[:, votes.prompt]
    if unit == "vote":
        return counts(votes.n)
    if unit == "pigeonhole":
        raters = counts(int(votes.rater.max()) + 1)[:, votes.rater]
        return raters * counts(int(votes.prompt.max()) + 1)[:, votes.prompt]
    raise ValueError(f"unknown bootstrap unit {unit!r}")


def _cluster_variance(values: np.ndarray, bounded: np.ndarray, clusters: int) -> np.ndarray:
    """Per column, the variance of the bounded replicates (ddof 1) times G/(G − 1) for G resampled clusters (the
    bootstrap variance of a mean over G clusters is (G − 1)/G of the unbiased one, as in CR1)."""
    kept = values[bounded]
    if kept.shape[0] < 2:
        return np.full(values.shape[1], np.nan)
    return kept.var(axis=0, ddof=1) * (clusters / (clusters - 1) if clusters > 1 else 1.0)


@dataclass(frozen=True)
class BootstrapResult:
    """Per parameter (the strengths by condition, then "tie" (ν) and the covariates): the estimate, the two-way
    standard error and interval, and per bootstrap unit the replicates, their variance and how many replicates
    had some unbounded strength (a condition that never won or never lost in it)."""

    names: tuple[str, ...]
    estimates: dict[str, float]
    se: dict[str, float]
    ci_low: dict[str, float]
    ci_high: dict[str, float]
    variances: dict[str, dict[str, float]]  # unit -> parameter -> variance
    replicates: dict[str, np.ndarray]  # unit -> (n_boot × parameters)
    unbounded: dict[str, int]
    n_boot: int
    df: float  # degrees of freedom of the interval's Student t: the fewer of raters and prompts, minus 1


def _parameters(fit: DavidsonFit) -> dict[str, float]:
    return {**fit.strengths, "tie": fit.tie, **fit.coefficients}


def bootstrap_replicates(
    votes: Votes,
    fit: DavidsonFit,
    *,
    unit: str,
    covariates: Sequence[str] = (),
    n_boot: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """`n_boot` refits of `fit` on bootstrap replicates resampling `unit` (n_boot × parameters, in
    `_parameters` order), each started from the estimate, with the bootstrap's tiny ridge so that a replicate in
    which some condition never won stays finite; and which replicates had every strength bounded."""
    base = votes.index(fit.baseline)
    design = design_of(votes, covariates, base)
    k = len(votes.conditions)
    ties = fit.tie > 0
    start = np.r_[np.delete(np.array(list(fit.strengths.values())), base), list(fit.coefficients.values())]
    if ties:
        start = np.r_[start, math.log(fit.tie)]
    chunk = max(1, BOOTSTRAP_CELLS // max(votes.n, 1))
    out, bounded = [], []
    for first in range(0, n_boot, chunk):
        vote_weights = bootstrap_weights(votes, unit, rng, min(chunk, n_boot - first))
        for w in vote_weights:
            try:
                identification_check(votes, w)
            except BradleyTerryError:
                bounded.append(False)
            else:
                bounded.append(True)
        params, _, _, _ = davidson_newton(
            design.m,
            design.outcome,
            design.weights(vote_weights),
            ties=ties,
            ridge=BOOTSTRAP_RIDGE,
            free=k - 1,
            start=start,
        )
        theta = np.insert(params[:, : k - 1], base, 0.0, axis=1)
        tie = np.exp(params[:, -1:]) if ties else np.zeros((params.shape[0], 1))
        out.append(np.hstack([theta, tie, params[:, k - 1 : k - 1 + len(covariates)]]))
    return np.vstack(out), np.array(bounded)


def twoway_bootstrap(
    votes: Votes,
    fit: DavidsonFit,
    *,
    covariates: Sequence[str] = (),
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> BootstrapResult:
    """The two-way cluster bootstrap of `fit` (module doc): `n_boot` replicates resampling raters, prompts and
    votes, V = V_rater + V_prompt − V_vote (else max(V_rater, V_prompt)), the interval estimate ± t·√V. Seeded:
    the same votes, seed and n_boot give the same result."""
    if n_boot < 20:
        raise BradleyTerryError(f"a bootstrap needs at least 20 replicates, got {n_boot}")
    rng = np.random.default_rng(seed)
    estimates = _parameters(fit)
    names = tuple(estimates)
    clusters = {"rater": int(votes.rater.max()) + 1, "prompt": int(votes.prompt.max()) + 1, "vote": votes.n}
    replicates, variances, unbounded = {}, {}, {}
    for unit in BOOTSTRAP_UNITS:
        replicates[unit], bounded = bootstrap_replicates(
            votes, fit, unit=unit, covariates=covariates, n_boot=n_boot, rng=rng
        )
        unbounded[unit] = int((~bounded).sum())
        values = _cluster_variance(replicates[unit], bounded, clusters[unit])
        variances[unit] = dict(zip(names, values.tolist(), strict=True))
    df = float(max(min(clusters["rater"], clusters["prompt"]) - 1, 1))
    quantile = float(student_t.ppf(1 - (1 - level) / 2, df))
    se, low, high = {}, {}, {}
    for name in names:
        v = {unit: variances[unit][name] for unit in BOOTSTRAP_UNITS}
        total = v["rater"] + v["prompt"] - v["vote"]
        if not total > 0:
            total = max(v["rater"], v["prompt"])
        se[name] = math.sqrt(total) if total >= 0 else math.nan
        low[name], high[name] = estimates[name] - quantile * se[name], estimates[name] + quantile * se[name]
    return BootstrapResult(names, estimates, se, low, high, variances, replicates, unbounded, n_boot, df)
