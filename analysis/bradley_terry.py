"""Pairwise preference statistics: Bradley–Terry with ties (Davidson), its two-way cluster bootstrap, the win
matrix, win rates against the baseline, position bias, agreement on repeated pairs, the adaptive pair weights and
power. Pure functions on a pandas frame (numpy, scipy, pandas; no Django), so the study's analysis, the pair
schedule and bench/pairwise.py call the same code.

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

Intervals (the two-way cluster bootstrap)
-----------------------------------------
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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import krippendorff
import numpy as np
import pandas as pd
from scipy.stats import norm
from scipy.stats import t as student_t

from analysis.clustered import clustered_mean

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
BOOTSTRAP_RIDGE = 1e-6  # keeps a bootstrap replicate in which some condition never wins finite
Z95 = float(norm.ppf(0.975))


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
        bad = sorted(set(frame["choice"].astype(str)) - set(CHOICES))
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
    seen = sorted(set(left_names) | set(right_names))
    names = tuple(str(c) for c in conditions) if conditions is not None else tuple(seen)
    if len(set(names)) != len(names):
        raise BradleyTerryError(f"conditions repeat a name: {list(names)}")
    unknown = sorted(set(seen) - set(names))
    if unknown:
        raise BradleyTerryError(f"votes name conditions {unknown} outside {list(names)}")
    lookup = {name: i for i, name in enumerate(names)}
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
        left=np.array([lookup[c] for c in left_names], dtype=np.int64),
        right=np.array([lookup[c] for c in right_names], dtype=np.int64),
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
class _Design:
    """The rows the likelihood sums over: (left, right, outcome) cells when no covariate varies by vote (the
    likelihood depends on their counts only), else the votes. `row_of_vote` maps a vote to its row."""

    m: (
        np.ndarray
    )  # the design of d: +1 at the left condition, −1 at the right, the baseline dropped; covariates
    outcome: np.ndarray
    row_of_vote: np.ndarray
    rows: int

    def weights(self, vote_weights: np.ndarray) -> np.ndarray:
        """(B × votes) vote weights → (B × rows) row weights."""
        if self.rows == self.row_of_vote.size and np.array_equal(self.row_of_vote, np.arange(self.rows)):
            return vote_weights
        out = np.zeros((vote_weights.shape[0], self.rows))
        for b in range(vote_weights.shape[0]):
            out[b] = np.bincount(self.row_of_vote, weights=vote_weights[b], minlength=self.rows)
        return out


def _design(votes: Votes, covariates: Sequence[str], base: int) -> _Design:
    k = len(votes.conditions)
    z = _covariate_matrix(votes, covariates)
    if "length" in covariates:
        left, right, outcome, row_of_vote = votes.left, votes.right, votes.outcome, np.arange(votes.n)
    else:
        cells, row_of_vote = np.unique(
            (votes.left * k + votes.right) * 3 + votes.outcome, return_inverse=True
        )
        left, right, outcome = cells // 3 // k, cells // 3 % k, cells % 3
        z = np.ones((cells.size, z.shape[1]))
    x = np.zeros((left.size, k))
    rows = np.arange(left.size)
    x[rows, left] += 1.0
    x[rows, right] -= 1.0
    m = np.hstack([np.delete(x, base, axis=1), z])
    return _Design(m, outcome.astype(np.int64), row_of_vote.ravel(), int(left.size))


def _probabilities(d: np.ndarray, kappa: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P(left), P(right), P(tie) at d (κ = log ν; None: plain Bradley–Terry). d is clipped to ±600, far beyond any
    strength a fit reaches, so e^{d/2} cannot overflow."""
    root = np.exp(np.clip(d, -600.0, 600.0) / 2)
    inverse = 1 / root
    nu = 0.0 if kappa is None else np.exp(kappa)
    z = root + inverse + nu
    return root / z, inverse / z, (nu / z) * np.ones_like(d)


def _newton(
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
    converged = np.zeros(b_count, dtype=bool)
    info = np.zeros((b_count, size, size))
    for _ in range(max_iter):
        pl, pr, pt = probabilities
        grad = np.zeros((b_count, size))
        grad[:, :p] = (w * (sign - (pl - pr)) / 2) @ m
        weighted = (w * (pl * pr + pt * (pl + pr) / 4))[:, :, None] * m
        info[:, :p, :p] = np.matmul(weighted.transpose(0, 2, 1), m)
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
    design = _design(votes, covariates, base)
    row_weights = design.weights(w[None, :])
    ties = bool((row_weights[0] * (design.outcome == TIE)).sum() > 0)
    params, info, value, converged = _newton(
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


# --- the two-way cluster bootstrap ----------------------------------------------------------------------------------

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
    design = _design(votes, covariates, base)
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
        params, _, _, _ = _newton(
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
        measures["both_inadequate"] = (frame["both_inadequate"].astype(bool).to_numpy().astype(int), 2)
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
