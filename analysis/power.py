"""Power before launch: participants per condition that the planned tests need.

The planned tests are those `analysis.stats.tests_table` runs for each condition against the baseline:

* the 2×3 chi-square test of independence (condition × Bad/Okay/Good, no continuity correction);
* the seed study's 2×2 Good-versus-rest chi-square with Yates' continuity correction.

Each is a family over the non-baseline conditions, corrected with Holm. Holm's first (smallest-p) step compares
p with α/m, the Bonferroni level (m = number of comparisons with the baseline); Holm rejects everything Bonferroni
rejects, so planning every comparison at α/m guarantees each one at least the stated power. That is the level used
here (conservative: later Holm steps test at α/(m−1), …, α).

How the figures are computed
----------------------------
* Effect size: Cohen's w of the condition-against-baseline table with equal group sizes, from statsmodels'
  `chisquare_effectsize` on the six (or four) cells of the joint table against its independence table.
* 2×3 test: statsmodels `GofChisquarePower` (non-central chi-square, df = 2) solved for the total number of
  ratings; half of them per condition.
* 2×2 test without correction: the same with df = 1 (reported as `ratings_uncorrected`); for reference,
  statsmodels `NormalIndPower` with Cohen's h is reported too.
* 2×2 test with Yates' correction: statsmodels has no continuity-corrected power. With equal groups of n, Yates'
  correction shrinks the observed difference of the two Good shares by 1/n, so the test behaves like the
  uncorrected one on a difference Δ − 1/n: power_Yates(n) = power(w · (Δ − 1/n)/Δ, 2n). Equivalently the
  uncorrected test at n(1 − 1/(nΔ))² per group, the classical continuity-corrected sample size of Fleiss, Levin &
  Paik (2003, §4.3) / Casagrande, Pike & Smith (1978). A test holds it to a simulation of scipy's
  `chi2_contingency(correction=True)`.

Ratings, participants and clustering
------------------------------------
ratings per condition = participants × items per participant. Ratings of one participant are not independent;
a design effect `design_effect` (1 + (items − 1)·ICC, analysis.clustered) multiplies the ratings needed before
dividing by items per participant. `power_plan` takes it as given (1 = independent ratings, as the seed study's
power analysis assumed); analysis.study_power chooses it for a stored study (from the baseline's ICC by default).

With a calibrated judge (analysis.ppi), PPI++ at the optimal λ has the variance of the human-only estimate times
1 − ρ² · N/(N + n) (ρ: the correlation of the human indicator with the judge's, N/n judge ratings per human
rating). The human ratings needed are the UNCORRECTED test's (a PPI comparison is a Wald test, with no continuity
correction) times the design effect times that factor; for the 2×3 test the least-helped category decides.
This is a planning approximation (a Wald test on PPI shares), not a PPI chi-square test.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import brentq
from statsmodels.stats.gof import chisquare_effectsize
from statsmodels.stats.power import GofChisquarePower, NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize

from analysis.clustered import icc_anova
from analysis.ppi import variance_factor

DEFAULT_ALPHA = 0.05  # the seed study's α for its chi-square tests
DEFAULT_POWERS = (0.8, 0.9)

TEST_2X3 = "2×3 chi-square vs baseline"
TEST_2X2_YATES = "2×2 Good-vs-rest chi-square vs baseline (Yates)"

# The published ratings of Welivita & Pu (arXiv 2403.05572), Bad/Okay/Good shares of 2,000 ratings per condition,
# computed from shared/data/llm-empathy-evaluation/dataset_and_ratings.csv (a test recomputes them from the file).
# `chatgpt_empathy` is the GPT-4 condition the 2024 paper reused.
SEED_SHARES: dict[str, tuple[float, float, float]] = {
    "human": (0.171, 0.336, 0.493),
    "chatgpt": (0.078, 0.288, 0.634),
    "chatgpt_empathy": (0.071, 0.2815, 0.6475),
}
# Their within-rater ICC of Good (analysis.clustered.icc_anova over each condition's 200 raters; a test recomputes
# them from the file). People rating LLM responses agree with themselves more: design effects 1.16 to 2.04 for ten.
SEED_ICC: dict[str, float] = {"human": 0.018, "chatgpt": 0.116, "chatgpt_empathy": 0.101}
SEED_BASELINE = "human"
SEED_ALTERNATIVE = "chatgpt_empathy"


MIN_ICC_RATINGS = 30  # fewer ratings than this: a baseline's ICC is not estimated


def baseline_icc(values, raters, top: int) -> float:
    """The within-rater ICC of the top value among a baseline's ratings (analysis.clustered.icc_anova); NaN when it
    cannot be estimated: fewer than MIN_ICC_RATINGS ratings, or fewer than two raters."""
    values = np.asarray(values)
    if values.size < MIN_ICC_RATINGS:
        return float("nan")
    return icc_anova((values == top).astype(float), np.asarray(raters).astype(str))


class PowerError(ValueError):
    """The requested plan cannot be computed (bad shares, α, power...)."""


def shares_check(shares: Sequence[float], *, name: str = "shares") -> np.ndarray:
    """Validated shares (non-negative, summing to 1 within 0.01, renormalised)."""
    arr = np.asarray(shares, dtype=float)
    if arr.ndim != 1 or arr.size < 2 or not np.all(np.isfinite(arr)) or (arr < 0).any():
        raise PowerError(f"{name} must be two or more non-negative numbers, got {list(shares)}")
    if abs(arr.sum() - 1) > 0.01:
        raise PowerError(f"{name} must sum to 1, got {arr.sum():.4f} ({list(shares)})")
    return arr / arr.sum()


def cohens_w(baseline: Sequence[float], condition: Sequence[float]) -> float:
    """Cohen's w of the (condition, baseline) × categories table with equal group sizes (statsmodels)."""
    base, cond = np.asarray(baseline, float), np.asarray(condition, float)
    joint = np.concatenate([cond, base]) / 2
    independent = np.concatenate([(cond + base) / 4, (cond + base) / 4])
    keep = independent > 0  # a category nobody chooses in either group carries no information
    return float(chisquare_effectsize(independent[keep], joint[keep]))


def _check_levels(alpha: float, power: float) -> None:
    if not 0 < alpha < 1:
        raise PowerError(f"α must be in (0, 1), got {alpha}")
    if not 0 < power < 1:
        raise PowerError(f"power must be in (0, 1), got {power}")


def chi2_ratings_per_condition(
    baseline: Sequence[float], condition: Sequence[float], *, alpha: float, power: float
) -> float:
    """Ratings per condition for the chi-square test of the condition against the baseline (no correction);
    inf when the shares are equal."""
    _check_levels(alpha, power)
    w = cohens_w(baseline, condition)
    if w < 1e-9:
        return math.inf
    df = int(np.count_nonzero((np.asarray(baseline) + np.asarray(condition)) > 0)) - 1
    total = GofChisquarePower().solve_power(effect_size=w, nobs=None, alpha=alpha, power=power, n_bins=df + 1)
    return float(total) / 2


def yates_power(n: float, p_condition: float, p_baseline: float, *, alpha: float) -> float:
    """Approximate power of the 2×2 chi-square with Yates' correction, n ratings in each group (module doc)."""
    delta = abs(p_condition - p_baseline)
    if delta == 0 or n * delta <= 1:
        return alpha if delta == 0 else 0.0
    w = cohens_w([1 - p_baseline, p_baseline], [1 - p_condition, p_condition]) * (delta - 1 / n) / delta
    return float(GofChisquarePower().power(effect_size=w, nobs=2 * n, alpha=alpha, n_bins=2))


def yates_ratings_per_condition(
    p_condition: float, p_baseline: float, *, alpha: float, power: float
) -> float:
    """Ratings per condition for the Yates-corrected 2×2 test to reach `power` (inf when the shares are equal)."""
    _check_levels(alpha, power)
    delta = abs(p_condition - p_baseline)
    if delta < 1e-9:
        return math.inf
    low = 1 / delta + 1e-6
    high = max(low * 2, 10.0)
    while yates_power(high, p_condition, p_baseline, alpha=alpha) < power:
        high *= 2
        if high > 1e12:
            return math.inf
    return float(
        brentq(lambda n: yates_power(n, p_condition, p_baseline, alpha=alpha) - power, low, high, xtol=1e-6)
    )


def normal_ind_ratings_per_condition(
    p_condition: float, p_baseline: float, *, alpha: float, power: float
) -> float:
    """statsmodels' two-proportion z-test sample size (Cohen's h, arcsine), per group, for reference."""
    _check_levels(alpha, power)
    h = abs(proportion_effectsize(p_condition, p_baseline))
    if h < 1e-9:
        return math.inf
    return float(NormalIndPower().solve_power(effect_size=h, nobs1=None, alpha=alpha, power=power, ratio=1.0))


@dataclass(frozen=True)
class PowerLine:
    condition: str
    test: str
    power: float
    alpha_family: float
    alpha_first_step: float
    effect_size_w: float
    ratings_per_condition: int | None  # for the planned test (Yates for the 2×2)
    ratings_uncorrected: int | None  # the same test without continuity correction (statsmodels)
    participants_per_condition: int | None
    ppi_ratings_per_condition: int | None
    ppi_participants_per_condition: int | None


def _ceil(x: float) -> int | None:
    return None if not math.isfinite(x) else int(math.ceil(x - 1e-9))


def power_plan(
    *,
    baseline: str,
    shares: Mapping[str, Sequence[float]],
    alpha: float = DEFAULT_ALPHA,
    powers: Sequence[float] = DEFAULT_POWERS,
    items_per_participant: int = 10,
    design_effect: float = 1.0,
    judge_correlation: float | Mapping[int, float] | None = None,
    judge_ratio: float | None = None,
) -> list[PowerLine]:
    """Participants per condition for each planned test, each non-baseline condition and each target power.

    shares: condition → expected Bad/.../Good shares (ascending scale; the baseline's included).
    judge_correlation: ρ of the judge with people, one number or one per category (index into the shares);
    judge_ratio: judge ratings per human rating (None: unlimited). Without ρ the PPI columns are None.

    A pure function of its arguments, remembered per process (`_power_plan_remembered`): solving for the sample
    sizes took ~75% of the admin's launch page (about 40 root findings), for the same study every time.
    """
    correlation = (
        ("by_category", tuple(sorted(judge_correlation.items())))
        if isinstance(judge_correlation, Mapping)
        else ("one", judge_correlation)
    )
    return list(
        _power_plan_remembered(
            baseline,
            tuple((name, tuple(float(x) for x in values)) for name, values in shares.items()),
            alpha,
            tuple(powers),
            items_per_participant,
            design_effect,
            correlation,
            judge_ratio,
        )
    )


@functools.lru_cache(maxsize=256)
def _power_plan_remembered(
    baseline, shares, alpha, powers, items_per_participant, design_effect, correlation, judge_ratio
) -> tuple[PowerLine, ...]:
    kind, value = correlation
    return tuple(
        _power_plan_solve(
            baseline=baseline,
            shares=dict(shares),
            alpha=alpha,
            powers=powers,
            items_per_participant=items_per_participant,
            design_effect=design_effect,
            judge_correlation=dict(value) if kind == "by_category" else value,
            judge_ratio=judge_ratio,
        )
    )


def _power_plan_solve(
    *,
    baseline: str,
    shares: Mapping[str, Sequence[float]],
    alpha: float,
    powers: Sequence[float],
    items_per_participant: int,
    design_effect: float,
    judge_correlation: float | Mapping[int, float] | None,
    judge_ratio: float | None,
) -> list[PowerLine]:
    if baseline not in shares:
        raise PowerError(f"no expected shares for the baseline {baseline!r}")
    if items_per_participant < 1:
        raise PowerError(f"items per participant must be at least 1, got {items_per_participant}")
    if design_effect < 1:
        raise PowerError(f"the design effect is at least 1, got {design_effect}")
    checked = {name: shares_check(s, name=f"shares of {name}") for name, s in shares.items()}
    sizes = {arr.size for arr in checked.values()}
    if len(sizes) != 1:
        raise PowerError("every condition's shares must cover the same scale")
    base = checked[baseline]
    others = [name for name in checked if name != baseline]
    if not others:
        raise PowerError("needs at least one condition besides the baseline")
    rho = _correlations(judge_correlation, base.size)
    first_step = alpha / len(others)
    lines = []
    for name in others:
        cond = checked[name]
        for power in powers:
            ratings = chi2_ratings_per_condition(base, cond, alpha=first_step, power=power)
            factor = None if rho is None else max(variance_factor(r, 1, judge_ratio) for r in rho)
            lines.append(
                _line(
                    name,
                    TEST_2X3,
                    power,
                    alpha,
                    first_step,
                    base,
                    cond,
                    ratings,
                    ratings,
                    factor,
                    items_per_participant,
                    design_effect,
                )
            )
            top_base, top_cond = float(base[-1]), float(cond[-1])
            yates = yates_ratings_per_condition(top_cond, top_base, alpha=first_step, power=power)
            top = [1 - top_base, top_base], [1 - top_cond, top_cond]
            plain = chi2_ratings_per_condition(*top, alpha=first_step, power=power)
            factor = None if rho is None else variance_factor(rho[-1], 1, judge_ratio)
            lines.append(
                _line(
                    name,
                    TEST_2X2_YATES,
                    power,
                    alpha,
                    first_step,
                    *top,
                    yates,
                    plain,
                    factor,
                    items_per_participant,
                    design_effect,
                )
            )
    return lines


def _correlations(judge_correlation, k: int) -> list[float] | None:
    if judge_correlation is None:
        return None
    if isinstance(judge_correlation, Mapping):
        rho = [float(judge_correlation[i]) for i in range(k)]
    else:
        rho = [float(judge_correlation)] * k
    for r in rho:
        if not -1 <= r <= 1:
            raise PowerError(f"a correlation must be in [-1, 1], got {r}")
    return rho


def _line(name, test, power, alpha, first_step, base, cond, ratings, plain, factor, items, deff) -> PowerLine:
    needed = ratings * deff
    ppi = None if factor is None else plain * deff * factor
    return PowerLine(
        condition=name,
        test=test,
        power=power,
        alpha_family=alpha,
        alpha_first_step=first_step,
        effect_size_w=cohens_w(base, cond),
        ratings_per_condition=_ceil(needed),
        ratings_uncorrected=_ceil(plain * deff),
        participants_per_condition=_ceil(needed / items),
        ppi_ratings_per_condition=None if ppi is None else _ceil(ppi),
        ppi_participants_per_condition=None if ppi is None else _ceil(ppi / items),
    )


def plan_as_dicts(lines: list[PowerLine]) -> list[dict]:
    return [asdict(line) for line in lines]
