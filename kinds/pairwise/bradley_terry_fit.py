"""The Davidson Bradley–Terry fit of pairwise preference votes (the core of kinds.pairwise.bradley_terry, which
re-exports it): the votes as arrays, the maximum-likelihood fit and the check that the strengths are identified.
Pure numpy and pandas.

The frame: one row per answered (non-attention) pair, with `participant`, `prompt_id`, `left_condition`,
`right_condition`, `choice` in {left, right, tie}, `both_inadequate`, `response_time_ms`, `left_length`,
`right_length` (reply lengths in characters) and `position` (the page's place in the participant's sequence).

The model
---------
Condition i has log-strength θ_i, the baseline's fixed at 0. For a vote with condition i on the left and j on the
right, d = θ_i − θ_j (+ γ, the left side's advantage, when position is a covariate; + β·log2(len_left/len_right)
when length is). Davidson (1970):

    P(left) = e^{d/2} / Z,   P(right) = e^{−d/2} / Z,   P(tie) = ν / Z,   Z = e^{d/2} + e^{−d/2} + ν,

the ratio form of π_i / (π_i + π_j + ν√(π_i π_j)). A tie is its own outcome, not half a win; with no tie in the
data ν's estimate is 0 and the model is plain Bradley–Terry (P(left) = logistic(d)). Fitted by maximum likelihood
with Newton's method on the analytic gradient and information (which does not depend on the outcome, so observed
and expected information are the same):

    ∂ℓ/∂d = (s − (P_L − P_R)) / 2          (s = +1 left, −1 right, 0 tie)
    ∂ℓ/∂κ = [tie] − P_T                     (κ = log ν)
    I_dd = P_L·P_R + P_T·(P_L + P_R)/4,   I_dκ = −P_T·(P_L − P_R)/2,   I_κκ = P_T·(1 − P_T).

Strengths are identified when every condition has votes, the comparison graph is connected, and every condition
both won-or-tied and lost-or-tied along a cycle (the graph of "won or tied against" is strongly connected; Ford
1957): otherwise a strength is unbounded and `BradleyTerryError` says which conditions are at fault.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

CHOICES = ("left", "right", "tie")
LEFT, RIGHT, TIE = range(3)
COLUMNS = (
    "participant",
    "prompt_id",
    "left_condition",
    "right_condition",
    "choice",
    "both_inadequate",
    "response_time_ms",
    "left_length",
    "right_length",
    "position",
)
COVARIATES = ("position", "length")


class BradleyTerryError(ValueError):
    """The votes cannot give the asked estimate (missing columns, bad choices, unidentified strengths)."""


# --- the votes as arrays -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Votes:
    """The frame's votes encoded for fitting: condition indices into `conditions`, outcome codes, cluster codes."""

    conditions: tuple[str, ...]
    left: np.ndarray
    right: np.ndarray
    outcome: np.ndarray  # LEFT, RIGHT, TIE
    rater: np.ndarray  # codes 0..raters−1
    prompt: np.ndarray  # codes 0..prompts−1
    length_log2_ratio: np.ndarray  # log2(len_left / len_right), lengths floored at 1 character

    @property
    def n(self) -> int:
        return int(self.left.size)

    def index(self, condition: str) -> int:
        try:
            return self.conditions.index(condition)
        except ValueError:
            raise BradleyTerryError(
                f"{condition!r} is not one of the conditions ({list(self.conditions)})"
            ) from None


def frame_check(frame: pd.DataFrame, *, needs: Iterable[str] = COLUMNS) -> None:
    """BradleyTerryError naming the missing columns, bad choices or same-condition pairs of `frame`."""
    missing = [c for c in needs if c not in frame.columns]
    if missing:
        raise BradleyTerryError(f"the pairwise frame lacks the columns {missing}")
    if "choice" in frame.columns:
        bad = sorted(set(pd.unique(frame["choice"].astype(str))) - set(CHOICES))
        if bad:
            raise BradleyTerryError(f"choice must be one of {list(CHOICES)}, got {bad}")
    if {"left_condition", "right_condition"} <= set(frame.columns):
        same = frame["left_condition"].astype(str) == frame["right_condition"].astype(str)
        if same.any():
            raise BradleyTerryError(f"{int(same.sum())} vote(s) compare a condition with itself")


def votes_from_frame(frame: pd.DataFrame, conditions: Sequence[str] | None = None) -> Votes:
    """The frame's votes as arrays. `conditions`: every condition of the study, in order (default: those in the
    frame, sorted); a vote of a condition outside them is an error."""
    frame_check(frame, needs=("participant", "prompt_id", "left_condition", "right_condition", "choice"))
    left_names = frame["left_condition"].astype(str).to_numpy()
    right_names = frame["right_condition"].astype(str).to_numpy()
    seen = sorted(set(pd.unique(left_names)) | set(pd.unique(right_names)))
    names = tuple(str(c) for c in conditions) if conditions is not None else tuple(seen)
    if len(set(names)) != len(names):
        raise BradleyTerryError(f"conditions repeat a name: {list(names)}")
    unknown = sorted(set(seen) - set(names))
    if unknown:
        raise BradleyTerryError(f"votes name conditions {unknown} outside {list(names)}")
    outcome = pd.Categorical(frame["choice"].astype(str), categories=list(CHOICES)).codes.astype(np.int64)
    if "left_length" in frame.columns and "right_length" in frame.columns:
        lengths = np.log2(
            np.maximum(frame["left_length"].to_numpy(dtype=float), 1.0)
            / np.maximum(frame["right_length"].to_numpy(dtype=float), 1.0)
        )
    else:
        lengths = np.full(len(frame), np.nan)
    return Votes(
        conditions=names,
        left=pd.Categorical(left_names, categories=list(names)).codes.astype(np.int64),
        right=pd.Categorical(right_names, categories=list(names)).codes.astype(np.int64),
        outcome=outcome,
        rater=pd.factorize(frame["participant"].astype(str), sort=True)[0].astype(np.int64),
        prompt=pd.factorize(frame["prompt_id"].astype(str), sort=True)[0].astype(np.int64),
        length_log2_ratio=lengths,
    )


# --- the Davidson fit ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DavidsonFit:
    """A fitted Davidson model. `strengths`: log-strengths by condition (the baseline's 0); `tie`: ν (0 when the
    votes hold no tie); `coefficients`: the covariates' (position: the left side's advantage γ; length: β per
    doubling of the left reply's length relative to the right's); `covariance`: the inverse Fisher information of
    (the free strengths in `conditions` order without the baseline, then log ν when ties are fitted, then the
    covariates), or the ridge-penalised one."""

    conditions: tuple[str, ...]
    baseline: str
    strengths: dict[str, float]
    tie: float
    coefficients: dict[str, float]
    covariance: np.ndarray
    log_likelihood: float
    votes: float

    def strength_covariance(self) -> np.ndarray:
        """The covariance of all the strengths (`conditions` order), the baseline's row and column 0."""
        k = len(self.conditions)
        free = [i for i, c in enumerate(self.conditions) if c != self.baseline]
        out = np.zeros((k, k))
        out[np.ix_(free, free)] = self.covariance[: k - 1, : k - 1]
        return out

    def strength_se(self) -> dict[str, float]:
        diagonal = np.diag(self.strength_covariance())
        return {c: float(math.sqrt(max(v, 0.0))) for c, v in zip(self.conditions, diagonal, strict=True)}


def _covariate_matrix(votes: Votes, covariates: Sequence[str]) -> np.ndarray:
    columns = []
    for name in covariates:
        if name == "position":
            columns.append(np.ones(votes.n))
        elif name == "length":
            if not np.all(np.isfinite(votes.length_log2_ratio)):
                raise BradleyTerryError(
                    "a length-controlled fit needs left_length and right_length on every vote"
                )
            columns.append(votes.length_log2_ratio)
        else:
            raise BradleyTerryError(f"unknown covariate {name!r} (known: {list(COVARIATES)})")
    return np.column_stack(columns) if columns else np.zeros((votes.n, 0))


@dataclass(frozen=True)
class Design:
    """The rows the likelihood sums over (`design_of`); `row_of_vote` maps a vote to its row."""

    m: (
        np.ndarray
    )  # the design of d: +1 at the left condition, −1 at the right, the baseline dropped; covariates
    outcome: np.ndarray
    row_of_vote: np.ndarray
    rows: int

    def weights(self, vote_weights: np.ndarray) -> np.ndarray:
        """(B × votes) vote weights → (B × rows) row weights."""
        out = np.zeros((vote_weights.shape[0], self.rows))
        for b in range(vote_weights.shape[0]):
            out[b] = np.bincount(self.row_of_vote, weights=vote_weights[b], minlength=self.rows)
        return out


def design_of(votes: Votes, covariates: Sequence[str], base: int) -> Design:
    """The likelihood's rows: the distinct (left, right, outcome, covariates) of the votes (the likelihood depends
    on their counts only), e.g. the twelve ordered pairs × three outcomes of four conditions, or with length as a
    covariate one row per prompt, ordered pair and outcome when a prompt's replies keep their lengths."""
    k = len(votes.conditions)
    z = _covariate_matrix(votes, covariates)
    cell = ((votes.left * k + votes.right) * 3 + votes.outcome).astype(float)
    rows, row_of_vote = np.unique(np.column_stack([cell, z]), axis=0, return_inverse=True)
    cells = rows[:, 0].astype(np.int64)
    left, right, outcome = cells // 3 // k, cells // 3 % k, cells % 3
    x = np.zeros((cells.size, k))
    index = np.arange(cells.size)
    x[index, left] += 1.0
    x[index, right] -= 1.0
    m = np.hstack([np.delete(x, base, axis=1), rows[:, 1:]])
    return Design(m, outcome.astype(np.int64), row_of_vote.ravel(), int(cells.size))


def _probabilities(d: np.ndarray, kappa: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P(left), P(right), P(tie) at d (κ = log ν; None: plain Bradley–Terry). d is clipped to ±600, far beyond any
    strength a fit reaches, so e^{d/2} cannot overflow."""
    root = np.exp(np.clip(d, -600.0, 600.0) / 2)
    inverse = 1 / root
    nu = 0.0 if kappa is None else np.exp(kappa)
    z = root + inverse + nu
    return root / z, inverse / z, (nu / z) * np.ones_like(d)


def davidson_newton(
    m: np.ndarray,
    outcome: np.ndarray,
    w: np.ndarray,
    *,
    ties: bool,
    ridge: float,
    free: int,
    start: np.ndarray | None = None,
    max_iter: int = 100,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Maximises B (ridge-penalised) Davidson log-likelihoods at once, one per row of the weights `w` (B × rows),
    over (the coefficients of m's columns, then κ = log ν when `ties`). A replicate whose weights hold no tie
    gets κ = −∞ (ν = 0: plain Bradley–Terry). Returns (params B × P, information B × P × P, log-likelihoods,
    converged B)."""
    b_count, p = w.shape[0], m.shape[1]
    size = p + ties
    sign = np.select([outcome == LEFT, outcome == RIGHT], [1.0, -1.0], 0.0)
    is_tie = (outcome == TIE).astype(float)
    tie_weight = (w * is_tie).sum(axis=1)
    no_ties = np.zeros(b_count, dtype=bool) if not ties else tie_weight <= 0
    params = np.zeros((b_count, size))
    if start is not None:
        params[:] = start
    elif ties:
        share = np.clip(tie_weight / w.sum(axis=1), 1e-12, 1 - 1e-12)
        params[:, p] = np.log(2 * share / (1 - share))
    if ties:
        params[no_ties, p] = -np.inf
    positive = w > 0

    def evaluate(params):
        d = params[:, :p] @ m.T
        kappa = params[:, p : p + 1] if ties else None
        pl, pr, pt = _probabilities(d, kappa)
        chosen = np.where(outcome == LEFT, pl, np.where(outcome == RIGHT, pr, pt))
        with np.errstate(divide="ignore"):
            log_p = np.where(positive, np.log(np.where(positive, chosen, 1.0)), 0.0)
        value = (w * log_p).sum(axis=1) - 0.5 * ridge * (params[:, :free] ** 2).sum(axis=1)
        return (pl, pr, pt), value

    probabilities, value = evaluate(params)
    outer = (m[:, :, None] * m[:, None, :]).reshape(m.shape[0], p * p)  # row n: m_n m_nᵀ, flattened
    converged = np.zeros(b_count, dtype=bool)
    info = np.zeros((b_count, size, size))
    for _ in range(max_iter):
        pl, pr, pt = probabilities
        grad = np.zeros((b_count, size))
        grad[:, :p] = (w * (sign - (pl - pr)) / 2) @ m
        info[:, :p, :p] = ((w * (pl * pr + pt * (pl + pr) / 4)) @ outer).reshape(b_count, p, p)
        if ties:
            grad[:, p] = np.where(no_ties, 0.0, (w * (is_tie - pt)).sum(axis=1))
            cross = (-w * pt * (pl - pr) / 2) @ m
            info[:, :p, p] = info[:, p, :p] = cross
            info[:, p, p] = np.where(no_ties, 1.0, (w * pt * (1 - pt)).sum(axis=1))
        grad[:, :free] -= ridge * params[:, :free]
        info[:, range(free), range(free)] += ridge
        try:
            step = np.linalg.solve(info, grad[..., None])[..., 0]
        except np.linalg.LinAlgError:
            raise BradleyTerryError(
                "the information matrix is singular: the strengths or a covariate are not identified (a covariate "
                "that never varies?)"
            ) from None
        step[converged] = 0.0
        scale = np.ones(b_count)
        for _halving in range(40):  # step halving keeps every iteration an ascent, replicate by replicate
            trial = params + scale[:, None] * step
            trial_probabilities, trial_value = evaluate(trial)
            worse = trial_value < value - 1e-12 * (1 + np.abs(value))
            if not worse.any():
                break
            scale[worse] /= 2
        moved = np.abs(scale[:, None] * step)
        moved[~np.isfinite(moved)] = 0.0
        params, probabilities, value = trial, trial_probabilities, trial_value
        converged |= moved.max(axis=1) < 1e-9
        if converged.all():
            break
    return params, info, value, converged


def _reach(adjacency: np.ndarray) -> np.ndarray:
    """reach[i, j]: j can be reached from i along the edges of `adjacency` (boolean transitive closure)."""
    reach = (adjacency > 0) | np.eye(adjacency.shape[0], dtype=bool)
    for _ in range(max(1, int(math.ceil(math.log2(max(adjacency.shape[0], 2)))))):
        reach = (reach.astype(np.int64) @ reach.astype(np.int64)) > 0
    return reach


def _beat_matrix(votes: Votes, w: np.ndarray) -> np.ndarray:
    """beat[i, j] > 0: condition i won or tied against j in the weighted votes."""
    k = len(votes.conditions)
    forward = np.bincount(votes.left * k + votes.right, weights=w * (votes.outcome != RIGHT), minlength=k * k)
    backward = np.bincount(votes.right * k + votes.left, weights=w * (votes.outcome != LEFT), minlength=k * k)
    return (forward + backward).reshape(k, k)


def identification_check(votes: Votes, weights: np.ndarray | None = None) -> None:
    """BradleyTerryError unless every condition's strength is finite and identified (module doc)."""
    k = len(votes.conditions)
    w = np.ones(votes.n) if weights is None else weights
    counts = np.bincount(votes.left, weights=w, minlength=k) + np.bincount(
        votes.right, weights=w, minlength=k
    )
    empty = [c for c, n in zip(votes.conditions, counts, strict=True) if n <= 0]
    if empty:
        raise BradleyTerryError(f"no votes compare {empty}: their strengths cannot be estimated")
    if float((w * (votes.outcome != TIE)).sum()) == 0:
        raise BradleyTerryError("every vote is a tie: the strengths and the tie parameter are not identified")
    beat = _beat_matrix(votes, w)
    weak = _reach(beat + beat.T)
    if not weak.all():
        groups = sorted({tuple(c for c, r in zip(votes.conditions, row, strict=True) if r) for row in weak})
        raise BradleyTerryError(
            f"the comparisons fall into {len(groups)} groups never compared with each other: "
            f"{[list(g) for g in groups]}; their strengths cannot be put on one scale"
        )
    reach = _reach(beat)
    if not reach.all():
        # The conditions from which every condition they reach reaches back form the sink groups of the graph:
        # groups that never won or tied against any condition outside, so their strengths are −∞ against them.
        sink = [c for i, c in enumerate(votes.conditions) if reach[reach[i], i].all()]
        raise BradleyTerryError(
            f"{sink} never won or tied against the other conditions they met: their strengths are unbounded "
            "(−∞); more votes are needed"
        )


def davidson_fit(
    frame_or_votes: pd.DataFrame | Votes,
    *,
    baseline: str,
    conditions: Sequence[str] | None = None,
    covariates: Sequence[str] = (),
    weights: np.ndarray | None = None,
    ridge: float = 0.0,
    check: bool = True,
) -> DavidsonFit:
    """Maximum-likelihood Davidson fit (module doc) of the votes, weighted by `weights` (one per vote). `covariates`:
    any of "position" (the left side's advantage γ) and "length" (β per doubling of the left reply's length over
    the right's). `ridge` > 0 adds −(ridge/2)·Σθ² to the log-likelihood (a weak prior at 0: finite strengths on
    any votes, used by the schedule); `check` refuses unidentified strengths first (BradleyTerryError)."""
    votes = (
        frame_or_votes if isinstance(frame_or_votes, Votes) else votes_from_frame(frame_or_votes, conditions)
    )
    base = votes.index(baseline)
    w = np.ones(votes.n) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (votes.n,):
        raise BradleyTerryError(f"{w.size} weights for {votes.n} votes")
    if check and ridge == 0:
        identification_check(votes, w)
    design = design_of(votes, covariates, base)
    row_weights = design.weights(w[None, :])
    ties = bool((row_weights[0] * (design.outcome == TIE)).sum() > 0)
    params, info, value, converged = davidson_newton(
        design.m, design.outcome, row_weights, ties=ties, ridge=ridge, free=len(votes.conditions) - 1
    )
    if not converged[0]:
        raise BradleyTerryError("the Davidson fit did not converge")
    return _fit_from(votes, baseline, covariates, params[0], info[0], float(value[0]), float(w.sum()))


def _fit_from(votes, baseline, covariates, params, info, value, total) -> DavidsonFit:
    k, q = len(votes.conditions), len(covariates)
    ties = params.size == k - 1 + q + 1
    base = votes.index(baseline)
    try:
        covariance = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        covariance = np.full_like(info, np.nan)
    theta = np.insert(params[: k - 1], base, 0.0)
    order = list(range(k - 1)) + list(range(k - 1 + q, k - 1 + q + ties)) + list(range(k - 1, k - 1 + q))
    return DavidsonFit(
        conditions=votes.conditions,
        baseline=baseline,
        strengths={c: float(t) for c, t in zip(votes.conditions, theta, strict=True)},
        tie=float(np.exp(params[-1])) if ties else 0.0,
        coefficients={name: float(params[k - 1 + i]) for i, name in enumerate(covariates)},
        covariance=covariance[np.ix_(order, order)],
        log_likelihood=value,
        votes=total,
    )
