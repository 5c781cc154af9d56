"""Conversations needed for the chat kind's source × label design (2 × 2, 2 × 3, or any S × L), at a stated
smallest effect, for the tests kinds/chat/stats.py runs: one conversation per participant, so no design effect.

Both tests are F tests of the cell-means OLS on N − S·L residual degrees of freedom; with n conversations in every
cell the noncentrality of a pattern of true cell means μ is λ = n · Σ γ² / σ², γ being the pattern's component the
test sees (Cohen 1988, ch. 8):

* the source effect (the primary's companion, S − 1 numerator df): the smallest difference δ_source in PETS points
  between the other source and the reference, the same under every label; γ = the source main effects ±δ/2 in
  every cell, so λ = n · L · δ² / (2σ²) for two sources;
* the source × label interaction ((S − 1)(L − 1) numerator df): the source effect under one label differs from
  its effect under the others by δ_interaction points; γ = the double-centred pattern of that one shifted cell.

Power = P(F' > F_crit) with F' noncentral (scipy.stats.ncf); n is the smallest whole number per cell reaching the
target. Cohen's f = sqrt(Σ γ² / (cells · σ²)) is reported beside it. tests/chat/test_chat_power.py checks the
2 × 2 source effect against statsmodels' two-sample t power (the same test when the labels are pooled) and the
interaction by simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

MAX_PER_CELL = 100_000


@dataclass(frozen=True)
class CellPower:
    test: str
    effect_points: float
    sd: float
    cohens_f: float
    power: float
    alpha: float
    per_cell: int | None  # None: not reachable below MAX_PER_CELL
    cells: int
    df_num: int

    @property
    def conversations(self) -> int | None:
        return None if self.per_cell is None else self.per_cell * self.cells


def source_pattern(sources: int, labels: int, effect: float) -> np.ndarray:
    """Cell means with the second source `effect` points above the others under every label."""
    mu = np.zeros((sources, labels))
    mu[1, :] = effect
    return mu


def interaction_pattern(sources: int, labels: int, effect: float) -> np.ndarray:
    """Cell means where the second source's effect is `effect` points larger under the last label only."""
    mu = np.zeros((sources, labels))
    mu[1, -1] = effect
    return mu


def main_component(mu: np.ndarray) -> np.ndarray:
    """The source main-effect component of cell means (row means minus the grand mean, in every cell)."""
    return np.repeat((mu.mean(axis=1) - mu.mean())[:, None], mu.shape[1], axis=1)


def interaction_component(mu: np.ndarray) -> np.ndarray:
    """The doubly centred interaction component of cell means."""
    return mu - mu.mean(axis=1, keepdims=True) - mu.mean(axis=0, keepdims=True) + mu.mean()


def f_power(n: int, *, component: np.ndarray, sd: float, df_num: int, alpha: float) -> float:
    """Power of the F test with `df_num` numerator df at `n` conversations a cell."""
    cells = component.size
    df_denom = cells * (n - 1)
    if df_denom < 1:
        return 0.0
    lam = n * float((component**2).sum()) / sd**2
    critical = sps.f.isf(alpha, df_num, df_denom)
    return float(sps.ncf.sf(critical, df_num, df_denom, lam))


def per_cell_needed(
    *, component: np.ndarray, sd: float, df_num: int, alpha: float, power: float
) -> int | None:
    """The smallest n per cell with `f_power` ≥ `power` (bisection on whole numbers); None beyond MAX_PER_CELL."""
    if not (component**2).sum() > 0:
        return None
    lo, hi = 2, 2
    while f_power(hi, component=component, sd=sd, df_num=df_num, alpha=alpha) < power:
        lo, hi = hi, hi * 2
        if hi > MAX_PER_CELL:
            return None
    while lo < hi:
        mid = (lo + hi) // 2
        if f_power(mid, component=component, sd=sd, df_num=df_num, alpha=alpha) >= power:
            hi = mid
        else:
            lo = mid + 1
    return hi


def design_power(
    *,
    sources: int,
    labels: int,
    source_effect: float,
    interaction_effect: float,
    sd: float,
    alpha: float,
    powers: tuple[float, ...],
) -> list[CellPower]:
    """Per target power, the conversations a cell needs for the source effect and for the interaction."""
    if sources < 2 or labels < 1:
        raise ValueError("the design needs two sources at least and one label")
    if not sd > 0:
        raise ValueError(f"the standard deviation must be positive, got {sd}")
    if not 0 < alpha < 1:
        raise ValueError(f"α must be in (0, 1), got {alpha}")
    tests = [
        (
            "source effect",
            source_effect,
            main_component(source_pattern(sources, labels, source_effect)),
            sources - 1,
        )
    ]
    if labels > 1:
        tests.append(
            (
                "source × label interaction",
                interaction_effect,
                interaction_component(interaction_pattern(sources, labels, interaction_effect)),
                (sources - 1) * (labels - 1),
            )
        )
    out = []
    for name, effect, component, df_num in tests:
        f = math.sqrt(float((component**2).sum()) / (component.size * sd**2))
        for target in powers:
            out.append(
                CellPower(
                    test=name,
                    effect_points=effect,
                    sd=sd,
                    cohens_f=f,
                    power=target,
                    alpha=alpha,
                    per_cell=per_cell_needed(
                        component=component, sd=sd, df_num=df_num, alpha=alpha, power=target
                    ),
                    cells=sources * labels,
                    df_num=df_num,
                )
            )
    return out
