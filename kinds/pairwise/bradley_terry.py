"""Pairwise preference statistics, on a pandas frame of votes: Bradley–Terry with ties (Davidson) and its
two-way cluster bootstrap (kinds.pairwise.bradley_terry_fit and kinds.pairwise.bradley_terry_bootstrap, re-exported here), the
win matrix, win rates against the baseline, position bias, agreement on repeated pairs, the adaptive pair weights
and power. Pure functions (numpy, scipy, pandas; no Django), so the study's analysis, the pair schedule and
bench/pairwise.py call the same code.

The frame: one row per answered (non-attention) pair, with `participant`, `prompt_id`, `left_condition`,
`right_condition`, `choice` in {left, right, tie}, `both_inadequate`, `response_time_ms`, `left_length`,
`right_length` (reply lengths in characters) and `position` (the page's place in the participant's sequence; not
modelled).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import krippendorff
import numpy as np
import pandas as pd
from scipy.stats import norm

from analysis.clustered import clustered_mean

from .bradley_terry_bootstrap import (
    BOOTSTRAP_UNITS,
    BootstrapResult,
    bootstrap_replicates,
    bootstrap_weights,
    twoway_bootstrap,
)
from .bradley_terry_fit import (
    CHOICES,
    COLUMNS,
    COVARIATES,
    LEFT,
    RIGHT,
    TIE,
    BradleyTerryError,
    DavidsonFit,
    Votes,
    davidson_fit,
    frame_check,
    identification_check,
    votes_from_frame,
)

__all__ = [
    "BOOTSTRAP_UNITS",
    "CHOICES",
    "COLUMNS",
    "COVARIATES",
    "LEFT",
    "RIGHT",
    "TIE",
    "BootstrapResult",
    "BradleyTerryError",
    "DavidsonFit",
    "Votes",
    "adaptive_pair_weights",
    "agreement",
    "bootstrap_replicates",
    "bootstrap_weights",
    "davidson_fit",
    "flag_values",
    "frame_check",
    "identification_check",
    "pairs_needed",
    "position_bias",
    "twoway_bootstrap",
    "votes_from_frame",
    "win_matrix",
    "win_rate_votes_needed",
    "win_rates",
]


# --- counts: the win matrix, win rates, position -------------------------------------------------------------------


def win_matrix(frame: pd.DataFrame, conditions: Sequence[str] | None = None) -> pd.DataFrame:
    """Every ordered pair of conditions that met (condition, opponent): the condition's wins, losses, ties,
    votes, and the three as shares of the votes. Ties are counted apart, never as half a win."""
    votes = votes_from_frame(frame, conditions)
    k = len(votes.conditions)
    wins, ties = np.zeros((k, k)), np.zeros((k, k))
    np.add.at(wins, (votes.left, votes.right), votes.outcome == LEFT)
    np.add.at(wins, (votes.right, votes.left), votes.outcome == RIGHT)
    np.add.at(ties, (votes.left, votes.right), votes.outcome == TIE)
    ties = ties + ties.T
    rows = []
    for i, a in enumerate(votes.conditions):
        for j, b in enumerate(votes.conditions):
            n = wins[i, j] + wins[j, i] + ties[i, j]
            if i == j or n == 0:
                continue
            rows.append(
                {"condition": a, "opponent": b, "wins": int(wins[i, j]), "losses": int(wins[j, i]),
                 "ties": int(ties[i, j]), "votes": int(n), "win_share": wins[i, j] / n,
                 "loss_share": wins[j, i] / n, "tie_share": ties[i, j] / n}
            )  # fmt: skip
    columns = [
        "condition",
        "opponent",
        "wins",
        "losses",
        "ties",
        "votes",
        "win_share",
        "loss_share",
        "tie_share",
    ]
    return pd.DataFrame(rows, columns=columns)


def _against(frame: pd.DataFrame, condition: str, baseline: str) -> pd.DataFrame:
    """The votes of `condition` against `baseline`, with `won` (1 condition won, 0 baseline won, NaN tie)."""
    left, right = frame["left_condition"].astype(str), frame["right_condition"].astype(str)
    mine = ((left == condition) & (right == baseline)) | ((left == baseline) & (right == condition))
    sub = frame.loc[mine]
    on_left = sub["left_condition"].astype(str) == condition
    choice = sub["choice"].astype(str)
    won = np.where(choice == "tie", np.nan, ((choice == "left") == on_left).astype(float))
    return sub.assign(won=won)


def win_rates(
    frame: pd.DataFrame, *, baseline: str, conditions: Sequence[str] | None = None, level: float = 0.95
) -> pd.DataFrame:
    """Each condition against the baseline: wins, losses, ties, and the win rate among non-tied votes with its
    interval and two-sided p against 50 %, cluster-robust by rater (analysis.clustered.clustered_mean)."""
    votes = votes_from_frame(frame, conditions)
    votes.index(baseline)
    z = float(norm.ppf(1 - (1 - level) / 2))
    rows = []
    for name in votes.conditions:
        if name == baseline:
            continue
        sub = _against(frame, name, baseline)
        decided = sub[sub["won"].notna()]
        row = {"condition": name, "baseline": baseline, "votes": len(sub), "wins": int((sub["won"] == 1).sum()),
               "losses": int((sub["won"] == 0).sum()), "ties": int(sub["won"].isna().sum()),
               "raters": int(sub["participant"].nunique())}  # fmt: skip
        row["tie_share"] = row["ties"] / row["votes"] if row["votes"] else math.nan
        row.update(_share_against_half(decided["won"].to_numpy(), decided["participant"].astype(str), z))
        rows.append(row)
    columns = ["condition", "baseline", "votes", "wins", "losses", "ties", "raters", "tie_share", "win_rate",
               "se", "ci_low", "ci_high", "p"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def _share_against_half(y: np.ndarray, clusters, z: float) -> dict:
    """A share with its rater-clustered interval and the two-sided p of its Wald test against 0.5; NaN with fewer
    than two votes."""
    if y.size < 2:
        share = float(y.mean()) if y.size else math.nan
        return {"win_rate": share, "se": math.nan, "ci_low": math.nan, "ci_high": math.nan, "p": math.nan}
    estimate = clustered_mean(y, clusters)
    se = estimate.se
    p = float(2 * norm.sf(abs(estimate.estimate - 0.5) / se)) if se > 0 else math.nan
    return {"win_rate": estimate.estimate, "se": se, "ci_low": estimate.estimate - z * se,
            "ci_high": estimate.estimate + z * se, "p": p}  # fmt: skip


def position_bias(frame: pd.DataFrame, *, level: float = 0.95) -> dict:
    """The left reply's share of wins among non-tied votes against 50 %, with its interval and p clustered by rater;
    left wins, right wins, ties."""
    frame_check(frame, needs=("participant", "choice"))
    choice = frame["choice"].astype(str)
    decided = frame[choice != "tie"]
    y = (decided["choice"].astype(str) == "left").to_numpy(dtype=float)
    z = float(norm.ppf(1 - (1 - level) / 2))
    out = _share_against_half(y, decided["participant"].astype(str), z)
    out["left_share"] = out.pop("win_rate")
    return {"left_wins": int((choice == "left").sum()), "right_wins": int((choice == "right").sum()),
            "ties": int((choice == "tie").sum()), **out}  # fmt: skip


def flag_values(series: pd.Series) -> np.ndarray:
    """A yes/no column as booleans, whether it holds booleans, 0/1 or the text of a CSV ("True", "false", "1")."""
    if series.dtype == bool:
        return series.to_numpy()
    if pd.api.types.is_numeric_dtype(series):
        return series.fillna(0).to_numpy() != 0
    return series.astype(str).str.strip().str.lower().isin(["true", "1", "yes", "t", "y"]).to_numpy()


# --- agreement on repeated pairs -----------------------------------------------------------------------------------


def agreement(frame: pd.DataFrame) -> dict:
    """Agreement between raters on repeated pairs: votes on the same prompt and the same unordered pair of
    conditions, each vote read as "the first condition (alphabetically) preferred", "the second", or "tie", so the
    side does not matter. Percent agreement over every pair of votes on a unit, and Krippendorff's alpha
    (nominal, `krippendorff` package), over units with at least two votes; also for the both-inadequate flag.
    NaN when no unit has two votes."""
    frame_check(frame, needs=("prompt_id", "left_condition", "right_condition", "choice"))
    left, right = frame["left_condition"].astype(str), frame["right_condition"].astype(str)
    first = np.where(left < right, left, right)
    second = np.where(left < right, right, left)
    choice = frame["choice"].astype(str).to_numpy()
    left_is_first = (left < right).to_numpy()
    code = np.where(choice == "tie", 2, np.where((choice == "left") == left_is_first, 0, 1))
    unit = pd.factorize(
        pd.Series(frame["prompt_id"].astype(str).to_numpy()) + "\x1f" + first + "\x1f" + second
    )[0]
    out = {"units_repeated": 0, "votes_on_repeated_units": 0}
    measures = {"choice": (code, 3)}
    if "both_inadequate" in frame.columns:
        measures["both_inadequate"] = (flag_values(frame["both_inadequate"]).astype(int), 2)
    for name, (values, levels) in measures.items():
        counts = np.zeros((int(unit.max()) + 1 if unit.size else 0, levels))
        np.add.at(counts, (unit, values), 1)
        repeated = counts[counts.sum(axis=1) >= 2]
        out["units_repeated"] = int(repeated.shape[0])
        out["votes_on_repeated_units"] = int(repeated.sum())
        out[f"{name}_percent_agreement"], out[f"{name}_alpha"] = _agreement_of(repeated)
    return out


def _agreement_of(counts: np.ndarray) -> tuple[float, float]:
    if counts.shape[0] == 0:
        return math.nan, math.nan
    n = counts.sum(axis=1)
    pairs = float((n * (n - 1) / 2).sum())
    agreeing = float((counts * (counts - 1) / 2).sum())
    percent = agreeing / pairs
    if (counts.sum(axis=0) > 0).sum() < 2:  # one value only: no variation to agree on beyond chance
        return percent, math.nan
    return percent, float(krippendorff.alpha(value_counts=counts, level_of_measurement="nominal"))


# --- the adaptive schedule's weights ----------------------------------------------------------------------------------

ADAPTIVE_RIDGE = 0.01  # a weak prior N(0, 100) on each strength: the weights exist for any votes, even none


def _capped(scores: np.ndarray, cap: float) -> np.ndarray:
    """`scores` normalised to shares with none above `cap`: the excess of a capped pair goes to the others in
    proportion to their scores (water-filling); equal shares when every score is 0."""
    scores = np.where(np.isfinite(scores) & (scores > 0), scores, 0.0)
    if scores.sum() <= 0:
        scores = np.ones_like(scores)
    shares = np.zeros_like(scores)
    free = np.ones(scores.size, dtype=bool)
    remaining = 1.0
    while True:
        part = np.where(free, scores, 0.0)
        if part.sum() <= 0:  # every remaining pair scored 0: they share what is left equally
            part = free.astype(float)
        trial = remaining * part / part.sum()
        over = free & (trial > cap + 1e-12)
        if not over.any():
            shares[free] = trial[free]
            return shares
        shares[over] = cap
        remaining -= cap * int(over.sum())
        free &= ~over


def adaptive_pair_weights(
    frame: pd.DataFrame,
    conditions: Sequence[str],
    *,
    warmup: int,
    cap: float,
    ridge: float = ADAPTIVE_RIDGE,
) -> dict[tuple[str, str], float]:
    """The share of new pairs each unordered condition pair should get: {(a, b): weight}, a before b in
    `conditions`' order, weights summing to 1, none above `cap`.

    Until the frame holds `warmup` votes among `conditions`: equal weights (the balanced design). After: each pair
    in proportion to how much the current strengths' intervals overlap, 2Φ(−|θ̂_a − θ̂_b| / se) (1 for two
    conditions not told apart, falling towards 0 as they separate), from one Davidson fit and its inverse Fisher
    information (ridge-penalised so that any votes give weights; no bootstrap: this runs at enrolment), capped at
    `cap` with the excess shared out among the other pairs."""
    names = [str(c) for c in conditions]
    if len(names) < 2 or len(set(names)) != len(names):
        raise BradleyTerryError(f"needs two or more distinct conditions, got {names}")
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    if not 1 / len(pairs) - 1e-12 <= cap <= 1:
        raise BradleyTerryError(f"cap must be in [1/{len(pairs)}, 1] for {len(pairs)} pairs, got {cap}")
    if warmup < 0:
        raise BradleyTerryError(f"warmup must be at least 0, got {warmup}")
    if not frame.empty:
        inside = frame["left_condition"].astype(str).isin(names) & frame["right_condition"].astype(str).isin(
            names
        )
        frame = frame.loc[inside]
    if len(frame) < max(warmup, 1):
        return {pair: 1 / len(pairs) for pair in pairs}
    fit = davidson_fit(frame, baseline=names[0], conditions=names, ridge=ridge, check=False)
    cov = fit.strength_covariance()
    scores = np.empty(len(pairs))
    for n, (a, b) in enumerate(pairs):
        i, j = names.index(a), names.index(b)
        se = math.sqrt(max(cov[i, i] + cov[j, j] - 2 * cov[i, j], 0.0))
        gap = abs(fit.strengths[a] - fit.strengths[b])
        scores[n] = 2 * norm.sf(gap / se) if se > 0 else float(gap == 0)
    return dict(zip(pairs, _capped(scores, cap).tolist(), strict=True))


# --- power ------------------------------------------------------------------------------------------------------------


def win_rate_votes_needed(win_rate: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Non-tied votes needed to tell a win rate `win_rate` from 50 % with a two-sided test at `alpha` and the
    given power: the one-sample normal test of a share, effect size (p − ½)/½ (what statsmodels' NormalIndPower
    gives with ratio 0), n = ((z_{1−α/2} + z_power) / (2·|p − ½|))². 55 % against 50 % at α 0.05 and 80 %: 785.
    Infinite at 50 %."""
    if not 0 < win_rate < 1:
        raise BradleyTerryError(f"a win rate must be in (0, 1), got {win_rate}")
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise BradleyTerryError(f"α and power must be in (0, 1), got {alpha} and {power}")
    if win_rate == 0.5:
        return math.inf
    return ((norm.ppf(1 - alpha / 2) + norm.ppf(power)) / (2 * abs(win_rate - 0.5))) ** 2


def pairs_needed(win_rate: float, *, tie_rate: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Pairs to show (ties included) for `win_rate_votes_needed` non-tied votes when a share `tie_rate` of the
    answers are ties."""
    if not 0 <= tie_rate < 1:
        raise BradleyTerryError(f"a tie rate must be in [0, 1), got {tie_rate}")
    return win_rate_votes_needed(win_rate, alpha=alpha, power=power) / (1 - tie_rate)
