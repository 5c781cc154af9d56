"""The chat kind's statistics: who answered (the source: an LLM condition or a person) crossed with who the
participant was told answered (the label: "an AI", "a person", none), one conversation per participant as the
unit, so rows are independent and no clustering is needed.

Model. Each outcome (the PETS total, its two factors, the study's scale as a score and its top answer's share)
is fitted by ordinary least squares on the source × label cells (the cell-means parametrisation of
`y ~ C(source) * C(label)`), with the HC3 heteroskedasticity-consistent covariance (MacKinnon & White 1985; cells
may differ in spread, and a person's replies plausibly do). Every test is a linear contrast of the cell means:

* the source effect: each other source's mean minus the reference source's, averaged over the labels with equal
  weight (the main effect of a balanced design); per label too (the simple effects);
* the label effect: each other label's mean minus the reference label's, averaged over the sources;
* the source × label interaction: whether the source effect differs between labels, the (S − 1)(L − 1) contrasts
  (source effect under label l) − (source effect under the reference label), tested jointly by a Wald F test
  with (q, N − cells) degrees of freedom.

Intervals are t intervals on N − cells degrees of freedom with the HC3 standard errors. The parametrisation does
not change the fit or HC3 (the leverage of a row is 1/n of its cell either way); tests/kinds/test_chat_stats.py
holds the estimates, standard errors and the interaction's F to statsmodels' OLS with `cov_type="HC3"`.
A cell with fewer than two conversations has no HC3 variance (its leverage is 1): the analysis refuses it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sps

from .pets_analysis import PETS_OUTCOMES, pets_scores

MIN_PER_CELL = 2  # HC3 needs two conversations in every cell
ENOUGH_PER_CELL = 20  # below this in any cell the analysts' page warns that intervals are wide and unstable


class ChatStatsError(ValueError):
    """The frame cannot be analysed as asked."""


@dataclass(frozen=True)
class Contrast:
    outcome: str
    test: str  # "source", "source within label", "label", "interaction"
    comparison: str
    estimate: float
    se: float
    ci_low: float
    ci_high: float
    statistic: float  # F (q numerator df) for joint tests, t otherwise
    df_num: int
    df_denom: int
    p: float


@dataclass(frozen=True)
class CellFit:
    """The cell means of one outcome and their HC3 covariance (diagonal: cells share no row)."""

    outcome: str
    sources: list[str]
    labels: list[str]
    means: np.ndarray  # (S, L)
    counts: np.ndarray  # (S, L)
    sds: np.ndarray  # (S, L)
    variances: np.ndarray  # (S, L) HC3 variance of each cell mean
    df: int  # N − cells

    def index(self, source: str, label: str) -> int:
        return self.sources.index(source) * len(self.labels) + self.labels.index(label)


def cell_fit(frame: pd.DataFrame, outcome: str, *, sources: list[str], labels: list[str]) -> CellFit:
    """OLS on the cells of `frame` (columns `source`, `label`, `outcome`) with HC3 (module doc). Rows with a
    missing outcome are left out."""
    rows = frame.dropna(subset=[outcome])
    shape = (len(sources), len(labels))
    means, counts, sds, variances = (np.full(shape, np.nan) for _ in range(4))
    for i, source in enumerate(sources):
        for j, label in enumerate(labels):
            y = rows.loc[(rows["source"] == source) & (rows["label"] == label), outcome].to_numpy(dtype=float)
            n = y.size
            counts[i, j] = n
            if n == 0:
                continue
            means[i, j] = y.mean()
            if n >= MIN_PER_CELL:
                residual_ss = float(((y - y.mean()) ** 2).sum())
                sds[i, j] = math.sqrt(residual_ss / (n - 1))
                # HC3: Σ e² / (1 − h)² with h = 1/n, times (1/n)² from (X'X)⁻¹ on each side.
                variances[i, j] = residual_ss / (n - 1) ** 2
    small = [
        f"{sources[i]} × {labels[j]} ({int(counts[i, j])})"
        for i in range(shape[0])
        for j in range(shape[1])
        if counts[i, j] < MIN_PER_CELL
    ]
    if small:
        raise ChatStatsError(
            f"{PETS_OUTCOMES.get(outcome, outcome)}: every source × label cell needs at least {MIN_PER_CELL} "
            f"conversations; too few in {', '.join(small)}"
        )
    df = int(counts.sum()) - shape[0] * shape[1]
    if df < 1:
        raise ChatStatsError("no residual degrees of freedom")
    return CellFit(outcome, list(sources), list(labels), means, counts, sds, variances, df)


def contrast_test(
    fit: CellFit, rows: np.ndarray, *, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(estimates, standard errors, Wald F, p) of the contrasts `rows` (q × cells) of the fit's cell means."""
    beta = fit.means.ravel()
    cov = np.diag(fit.variances.ravel())
    rows = np.atleast_2d(rows)
    estimate = rows @ beta
    cov_c = rows @ cov @ rows.T
    q = rows.shape[0]
    try:
        f = float(estimate @ np.linalg.solve(cov_c, estimate)) / q
    except np.linalg.LinAlgError:
        f = math.nan
    p = float(sps.f.sf(f, q, fit.df)) if math.isfinite(f) else math.nan
    return estimate, np.sqrt(np.diag(cov_c)), f, p


def _contrast(fit, test, comparison, row, level) -> Contrast:
    estimate, se, f, p = contrast_test(fit, row)
    half = float(sps.t.ppf(1 - (1 - level) / 2, fit.df)) * float(se[0])
    t = float(estimate[0] / se[0]) if se[0] > 0 else math.nan
    return Contrast(
        fit.outcome, test, comparison, float(estimate[0]), float(se[0]),
        float(estimate[0]) - half, float(estimate[0]) + half, t, 1, fit.df, p,
    )  # fmt: skip


def _cell_row(fit: CellFit, weights: dict[tuple[str, str], float]) -> np.ndarray:
    row = np.zeros(fit.means.size)
    for (source, label), w in weights.items():
        row[fit.index(source, label)] += w
    return row


def source_effect_row(fit: CellFit, source: str, *, label: str | None = None) -> np.ndarray:
    """`source` minus the reference source (the first), under `label` or averaged over the labels."""
    labels = fit.labels if label is None else [label]
    w = 1 / len(labels)
    weights: dict = {}
    for lab in labels:
        weights[(source, lab)] = weights.get((source, lab), 0) + w
        weights[(fit.sources[0], lab)] = weights.get((fit.sources[0], lab), 0) - w
    return _cell_row(fit, weights)


def interaction_rows(fit: CellFit) -> np.ndarray:
    """The (S − 1)(L − 1) differences of differences against the reference source and label."""
    rows = []
    for source in fit.sources[1:]:
        for label in fit.labels[1:]:
            rows.append(
                source_effect_row(fit, source, label=label)
                - source_effect_row(fit, source, label=fit.labels[0])
            )
    return np.array(rows)


def outcome_contrasts(fit: CellFit, *, level: float = 0.95) -> list[Contrast]:
    """Every contrast of one outcome: source effects (overall and per label), label effects, the interaction."""
    out = []
    ref_s, ref_l = fit.sources[0], fit.labels[0]
    for source in fit.sources[1:]:
        out.append(_contrast(fit, "source", f"{source} − {ref_s}", source_effect_row(fit, source), level))
        for label in fit.labels:
            out.append(
                _contrast(
                    fit, "source within label", f"{source} − {ref_s} | {label}",
                    source_effect_row(fit, source, label=label), level,
                )
            )  # fmt: skip
    for label in fit.labels[1:]:
        weights = {}
        for source in fit.sources:
            weights[(source, label)] = 1 / len(fit.sources)
            weights[(source, ref_l)] = -1 / len(fit.sources)
        out.append(_contrast(fit, "label", f"{label} − {ref_l}", _cell_row(fit, weights), level))
    if len(fit.sources) > 1 and len(fit.labels) > 1:
        rows = interaction_rows(fit)
        estimate, se, f, p = contrast_test(fit, rows)
        if rows.shape[0] == 1:  # one difference of differences: report it with its interval
            c = _contrast(
                fit, "interaction", f"({fit.sources[1]} − {ref_s}) by {fit.labels[1]} vs {ref_l}", rows, level
            )
            out.append(Contrast(**{**asdict(c), "statistic": f}))
        else:
            out.append(
                Contrast(
                    fit.outcome, "interaction", "source effect differs between labels", math.nan, math.nan,
                    math.nan, math.nan, f, rows.shape[0], fit.df, p,
                )
            )  # fmt: skip
    return out


def cells_table(fit: CellFit, *, level: float = 0.95) -> pd.DataFrame:
    """One row per source × label cell: n, mean, SD and the mean's HC3 t interval."""
    t = float(sps.t.ppf(1 - (1 - level) / 2, fit.df))
    records = []
    for i, source in enumerate(fit.sources):
        for j, label in enumerate(fit.labels):
            se = math.sqrt(fit.variances[i, j])
            records.append(
                {
                    "outcome": fit.outcome,
                    "source": source,
                    "label": label,
                    "n": int(fit.counts[i, j]),
                    "mean": float(fit.means[i, j]),
                    "sd": float(fit.sds[i, j]),
                    "ci_low": float(fit.means[i, j]) - t * se,
                    "ci_high": float(fit.means[i, j]) + t * se,
                }
            )
    return pd.DataFrame.from_records(records)


def scale_outcomes(frame: pd.DataFrame, scale: list[str]) -> pd.DataFrame:
    """`frame` with the study's own scale as `scale_score` (1 for the last value up to the number of values for the
    first: Good/Okay/Bad → 3/2/1) and `scale_top` (1 when the first value was chosen, else 0). NaN when the
    conversation has no scale answer."""
    out = frame.copy()
    if "scale" not in out or not scale:
        out["scale_score"] = np.nan
        out["scale_top"] = np.nan
        return out
    scores = {value: len(scale) - k for k, value in enumerate(scale)}
    out["scale_score"] = out["scale"].map(scores).astype(float)
    out["scale_top"] = np.where(out["scale"].isna(), np.nan, (out["scale"] == scale[0]).astype(float))
    return out


OUTCOME_NAMES = {
    **PETS_OUTCOMES,
    "scale_score": "the study's scale (score)",
    "scale_top": "the scale's top answer",
}


@dataclass
class ChatStats:
    sources: list[str]
    labels: list[str]
    cells: pd.DataFrame
    contrasts: pd.DataFrame
    counts: pd.DataFrame  # source × label conversation counts
    too_little: list[str]  # warnings: cells below ENOUGH_PER_CELL
    headline: str
    conversations: int
    reliability: dict = field(default_factory=dict)  # Cronbach's α on the study's answers (pets_analysis)


def chat_stats(
    frame: pd.DataFrame,
    *,
    sources: list[str],
    labels: list[str],
    scale: list[str] | None = None,
    level: float = 0.95,
) -> ChatStats:
    """The whole analysis of one-row-per-conversation `frame` (columns `participant`, `source`, `label`,
    `pets_1`…`pets_10`, optionally `scale`): the reference source and label are the first of `sources` and
    `labels`. Refuses a frame with two rows of one participant (the unit is the conversation of one
    participant)."""
    if frame["participant"].duplicated().any():
        raise ChatStatsError("one conversation per participant: the frame repeats a participant")
    unknown = sorted(set(frame["source"]) - set(sources)) + sorted(set(frame["label"]) - set(labels))
    if unknown:
        raise ChatStatsError(f"rows with a source or label the design does not have: {unknown}")
    scored = scale_outcomes(pets_scores(frame), list(scale or []))
    outcomes = list(PETS_OUTCOMES) + [k for k in ("scale_score", "scale_top") if scored[k].notna().any()]
    cells, contrasts = [], []
    for outcome in outcomes:
        fit = cell_fit(scored, outcome, sources=sources, labels=labels)
        cells.append(cells_table(fit, level=level))
        contrasts.extend(asdict(c) for c in outcome_contrasts(fit, level=level))
    counts = pd.crosstab(
        pd.Categorical(scored["source"], sources), pd.Categorical(scored["label"], labels), dropna=False
    )
    counts.index.name, counts.columns.name = "source", "label"
    too_little = [
        f"{s} × {lab}: {int(counts.loc[s, lab])} conversations"
        for s in sources
        for lab in labels
        if counts.loc[s, lab] < ENOUGH_PER_CELL
    ]
    contrasts_frame = pd.DataFrame.from_records(contrasts)
    return ChatStats(
        sources=list(sources),
        labels=list(labels),
        cells=pd.concat(cells, ignore_index=True),
        contrasts=contrasts_frame,
        counts=counts,
        too_little=too_little,
        headline=headline(contrasts_frame, sources=sources, labels=labels, level=level),
        conversations=len(scored),
    )


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def headline(contrasts: pd.DataFrame, *, sources: list[str], labels: list[str], level: float = 0.95) -> str:
    """One sentence: the first other source's effect on the PETS total against the reference source, with its
    interval, and whether the label changed it (the interaction test)."""
    pets = contrasts[contrasts["outcome"] == "pets"]
    if len(sources) < 2:
        return "One source only: no source effect to report."
    main = pets[(pets["test"] == "source") & (pets["comparison"] == f"{sources[1]} − {sources[0]}")].iloc[0]
    direction = "higher" if main["estimate"] >= 0 else "lower"
    sentence = (
        f"Conversations with {sources[1]} were rated {abs(main['estimate']):.1f} PETS points {direction} than with "
        f"{sources[0]} ({level:.0%} CI {main['ci_low']:.1f} to {main['ci_high']:.1f}, {_p(main['p'])})"
    )
    inter = pets[pets["test"] == "interaction"]
    if inter.empty:
        return sentence + "."
    row = inter.iloc[0]
    stat = f"interaction F({int(row['df_num'])}, {int(row['df_denom'])}) = {row['statistic']:.2f}, {_p(row['p'])}"
    differs = "differed" if row["p"] < (1 - level) else "did not differ detectably"
    return f"{sentence}, and the gap {differs} by the label shown ({stat})."
