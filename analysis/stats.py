"""Statistics of a rating study, on the frame `kinds.rating.frame.rating_rows_frame` returns.

Pure functions of DataFrames (no database): each is tested against scipy/statsmodels called directly on small
tables whose answers are known.

Conventions
-----------
* Scale values are integers; the highest one is the "top" value (Good in the seed study).
* Chi-square tests of independence are scipy's `chi2_contingency`: without continuity correction for the omnibus
  and 2×k tests, with Yates' correction for the 2×2 Good-vs-rest test (as the seed study did). Rows or columns that
  are all zero are dropped first (a value nobody chose carries no information); a table left with fewer than two
  rows or columns gets no test (p = NaN and a note).
* Cramér's V is computed from the UNCORRECTED chi-square statistic: sqrt(chi2 / (n · (min(r, c) − 1))).
* The PRIMARY comparison of a condition with the baseline is `TEST_CLUSTERED`: the difference of the top shares
  with a participant-cluster-robust standard error (analysis.clustered: GEE with an independence working
  correlation, Wald z), because a participant gives several ratings and those are not independent (the published
  study's within-rater ICC of Good is 0.02–0.12, a design effect up to 2 for ten ratings). The chi-square and
  Yates tests are the seed study's own procedure: they stay in the tables, labelled so, and the published
  reproductions check them; they treat ratings as independent.
* Holm's correction (statsmodels `multipletests(method="holm")`) is applied within a family = one kind of test at one
  level of breakdown: e.g. all 2×2 Yates tests of the per-emotion breakdown (every emotion × every condition against
  the baseline) are corrected together; the overall omnibus test is its own family of one.
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import chi2_contingency, fisher_exact
from statsmodels.stats.multitest import multipletests

from analysis.clustered import clustered_difference, design_effect, icc_anova

OVERALL = "overall"
BY_VALENCE = "valence"
BY_EMOTION = "emotion"

TEST_OMNIBUS = "omnibus chi-square (condition × rating)"
TEST_2XK = "chi-square vs baseline (2 × scale)"
TEST_2X2 = "chi-square vs baseline (2 × 2 top vs rest, Yates)"
TEST_CLUSTERED = "top share vs baseline: participant-clustered Wald (primary)"
# Each test of the rating kind's declared plan (studies/kinds/rating.py RATING_PLAN) by its key: the rows of the
# tests table that report it. The analysis reports the rows of the declared primary test as primary.
TEST_BY_KEY = {"clustered": TEST_CLUSTERED, "omnibus": TEST_OMNIBUS, "2xk": TEST_2XK, "2x2": TEST_2X2}
# The one line the dashboard and the report print about which test decides, and why.
PRIMARY_LINE = (
    "the chi-square and Yates tests are the seed study's own procedure, kept for comparison with the paper."
)


def primary_line(primary_test: dict) -> str:
    """Which test decides, as pre-registered (the kind's declared primary test), and what the others are."""
    return f"Primary test (as pre-registered): {primary_test['name']}; {PRIMARY_LINE}"


# --- Distributions --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    values: tuple[int, ...]  # ascending
    labels: tuple[str, ...]  # same order

    @classmethod
    def from_study_scale(cls, scale: list[dict]) -> Scale:
        pairs = sorted((int(o["value"]), str(o.get("label", o["value"]))) for o in scale)
        return cls(values=tuple(v for v, _ in pairs), labels=tuple(label for _, label in pairs))

    @property
    def top(self) -> int:
        return self.values[-1]

    @property
    def top_label(self) -> str:
        return self.labels[-1]


def counts_table(rows: pd.DataFrame, scale: Scale, by: list[str]) -> pd.DataFrame:
    """Counts of each scale value per group (groups as the index, one column per scale value, ascending)."""
    counts = rows.groupby([*by, "value"], sort=True).size().unstack("value", fill_value=0)
    return counts.reindex(columns=list(scale.values), fill_value=0).astype("int64")


def distribution_table(
    rows: pd.DataFrame, scale: Scale, by: list[str], conditions: list[str]
) -> pd.DataFrame:
    """Per group of `by` (which must end with "condition"): participants, ratings, n and % of each scale value."""
    counts = counts_table(rows, scale, by)
    participants = rows.groupby(by, sort=True)["participant_id"].nunique()
    out = pd.DataFrame(index=counts.index)
    out["participants"] = participants.reindex(counts.index).fillna(0).astype("int64")
    out["ratings"] = counts.sum(axis=1)
    for value, label in zip(scale.values, scale.labels, strict=True):
        out[f"n_{label}"] = counts[value]
    for value, label in zip(scale.values, scale.labels, strict=True):
        out[f"pct_{label}"] = 100.0 * counts[value] / out["ratings"].where(out["ratings"] > 0)
    # The mean scale value: the earlier paper's "about 10% more empathetic" compares these, not shares of Good.
    out["mean"] = (counts * np.array(scale.values)).sum(axis=1) / out["ratings"].where(out["ratings"] > 0)
    out = out.reset_index()
    order = {name: i for i, name in enumerate(conditions)}
    out["_order"] = out["condition"].map(order)
    return out.sort_values([*by[:-1], "_order"]).drop(columns="_order").reset_index(drop=True)


def top_change(top_share_model: float, top_share_baseline: float) -> float:
    """The seed study's headline: (Good_model − Good_baseline) / Good_baseline, NaN when the baseline has none."""
    if not top_share_baseline or math.isnan(top_share_baseline):
        return float("nan")
    return (top_share_model - top_share_baseline) / top_share_baseline


def change_table(dist: pd.DataFrame, scale: Scale, baseline: str, by: list[str]) -> pd.DataFrame:
    """For each group of `by` (without condition) and each non-baseline condition: the top share of both and the
    relative change."""
    col = f"pct_{scale.top_label}"
    lines = []
    groups = dist.groupby(by, sort=False) if by else [((), dist)]
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        base = sub.loc[sub["condition"] == baseline, col]
        base_share = float(base.iloc[0]) / 100 if len(base) else float("nan")
        for _, line in sub[sub["condition"] != baseline].iterrows():
            share = float(line[col]) / 100
            lines.append(
                {
                    **dict(zip(by, key, strict=True)),
                    "condition": line["condition"],
                    "baseline": baseline,
                    "top_share": share,
                    "top_share_baseline": base_share,
                    "change": top_change(share, base_share),
                }
            )
    return pd.DataFrame(lines)


# --- Tests ----------------------------------------------------------------------------------------------


@dataclass
class ChiSquare:
    statistic: float
    dof: int
    p: float
    cramers_v: float
    n: int
    note: str = ""
    min_expected: float = float("nan")  # the smallest expected cell count under independence
    p_exact: float = float("nan")  # Fisher's exact p (2 × 2 tables with a small sample only)


# Below this smallest expected cell count a chi-square's p-value is not trusted (the usual rule of thumb): the test
# is marked small-sample, and a 2 × 2 table also gets Fisher's exact p.
SMALL_SAMPLE_MIN_EXPECTED = 5.0
# The primary (participant-clustered) test also needs enough participants: its standard error is estimated from them.
SMALL_SAMPLE_MIN_PARTICIPANTS = 10
SMALL_SAMPLE_NOTE = (
    f"small sample: an expected count below {SMALL_SAMPLE_MIN_EXPECTED:g}, the chi-square is unreliable"
)


def chi_square(table: np.ndarray, *, yates: bool) -> ChiSquare:
    """Chi-square test of independence of an r × c count table (see the module's conventions)."""
    table = np.asarray(table, dtype=float)
    table = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0] if table.size else table
    n = int(table.sum()) if table.size else 0
    if table.ndim != 2 or table.shape[0] < 2 or table.shape[1] < 2:
        return ChiSquare(
            float("nan"),
            0,
            float("nan"),
            float("nan"),
            n,
            "not testable: fewer than two non-empty rows or columns",
        )
    result = chi2_contingency(table, correction=yates)
    uncorrected = chi2_contingency(table, correction=False).statistic if yates else result.statistic
    k = min(table.shape) - 1
    v = math.sqrt(uncorrected / (n * k)) if n and k else float("nan")
    min_expected = float(np.min(result.expected_freq))
    out = ChiSquare(
        float(result.statistic), int(result.dof), float(result.pvalue), v, n, min_expected=min_expected
    )
    if min_expected < SMALL_SAMPLE_MIN_EXPECTED:
        out.note = SMALL_SAMPLE_NOTE
        if table.shape == (2, 2):
            out.p_exact = float(fisher_exact(table).pvalue)
            out.note += " (Fisher's exact p given)"
    return out


def top_vs_rest(counts: np.ndarray) -> np.ndarray:
    """Collapse a count table (rows × ascending scale) to [top, rest] columns."""
    counts = np.asarray(counts)
    return np.column_stack([counts[:, -1], counts[:, :-1].sum(axis=1)])


def tests_table(
    rows: pd.DataFrame,
    scale: Scale,
    conditions: list[str],
    baseline: str,
    *,
    correction: str = "holm",
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Every test, overall / by valence / per emotion, with raw and Holm-corrected p-values (see the module), and
    `p_adjusted` by the planned `correction` within the same families with `significant` (p_adjusted < alpha)."""
    lines = []
    breakdowns = [(OVERALL, None), (BY_VALENCE, "valence"), (BY_EMOTION, "emotion")]
    for scope, column in breakdowns:
        groups = [("all", rows)] if column is None else sorted(rows.groupby(column), key=lambda g: str(g[0]))
        for group, sub in groups:
            counts = counts_table(sub, scale, ["condition"]).reindex(conditions, fill_value=0)
            present = [c for c in conditions if counts.loc[c].sum() > 0]
            omnibus = chi_square(counts.loc[present].to_numpy(), yates=False)
            lines.append(_line(scope, group, TEST_OMNIBUS, " × ".join(present), omnibus, None, None))
            if baseline not in present:
                continue
            base = counts.loc[baseline].to_numpy()
            base_share = base[-1] / base.sum()
            for condition in conditions:
                if condition == baseline or condition not in present:
                    continue
                pair = np.vstack([counts.loc[condition].to_numpy(), base])
                share = pair[0, -1] / pair[0].sum()
                label = f"{condition} vs {baseline}"
                lines.append(
                    _line(scope, group, TEST_2XK, label, chi_square(pair, yates=False), share, base_share)
                )
                lines.append(
                    _line(
                        scope,
                        group,
                        TEST_2X2,
                        label,
                        chi_square(top_vs_rest(pair), yates=True),
                        share,
                        base_share,
                    )
                )
                lines.append(
                    _clustered_line(
                        scope, group, label, sub, condition, baseline, scale.top, share, base_share
                    )
                )
    table = pd.DataFrame(lines)
    table["p_holm"] = np.nan
    table["p_adjusted"] = np.nan
    for (_scope, _test), idx in table.groupby(["scope", "test"]).groups.items():
        p = table.loc[idx, "p"]
        ok = p.notna()
        if ok.any():
            table.loc[p[ok].index, "p_holm"] = holm(p[ok].to_numpy())
            table.loc[p[ok].index, "p_adjusted"] = p_adjust(p[ok].to_numpy(), correction)
    table["significant"] = table["p_adjusted"] < alpha  # NaN (not testable) compares False
    table["holm_family"] = table["scope"] + ": " + table["test"]
    return table


def top_share_clustered(rows: pd.DataFrame, condition: str, top: int):
    """(top indicator, participant ids) of one condition's ratings."""
    mine = rows[rows["condition"] == condition]
    return (mine["value"] == top).to_numpy(float), mine["participant_id"].to_numpy()


def _clustered_line(scope, group, label, rows, condition, baseline, top_value, share, base_share) -> dict:
    """The primary test's line (module doc): difference of top shares, participant-cluster-robust Wald z."""
    y, c = top_share_clustered(rows, condition, top_value)
    y0, c0 = top_share_clustered(rows, baseline, top_value)
    line = {
        "scope": scope,
        "group": str(group),
        "test": TEST_CLUSTERED,
        "comparison": label,
        "n": int(y.size + y0.size),
        "top_share": share,
        "top_share_baseline": base_share,
        "change": top_change(share, base_share),
        "small_sample": False,
        "note": "",
        "procedure": "primary (participant-clustered)",
    }
    if min(len(set(c)), len(set(c0))) < 2:
        line.update(
            p=np.nan, small_sample=True, note="not testable: fewer than two participants in a condition"
        )
        return line
    d = clustered_difference(y, c, y0, c0)
    top = np.array([[y.sum(), y.size - y.sum()], [y0.sum(), y0.size - y0.sum()]])
    expected = top.sum(axis=1, keepdims=True) * top.sum(axis=0, keepdims=True) / top.sum()
    few = min(len(set(c)), len(set(c0))) < SMALL_SAMPLE_MIN_PARTICIPANTS
    if few or expected.min() < SMALL_SAMPLE_MIN_EXPECTED:
        line.update(
            small_sample=True,
            note=f"small sample: fewer than {SMALL_SAMPLE_MIN_PARTICIPANTS} participants in a condition or an "
            f"expected count below {SMALL_SAMPLE_MIN_EXPECTED:g}, the clustered test is unreliable",
        )
    iccs = [icc_anova(v, k) for v, k in ((y, c), (y0, c0))]
    items = (y.size + y0.size) / (len(set(c)) + len(set(c0)))
    line.update(
        difference=d.estimate,
        se=d.se,
        ci_low=d.ci_low,
        ci_high=d.ci_high,
        z=d.z,
        p=d.p,
        icc=float(np.nanmax(iccs)) if not all(np.isnan(iccs)) else np.nan,
        design_effect=max(design_effect(i, items) for i in iccs),
    )
    return line


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values (statsmodels `multipletests(method="holm")`)."""
    return p_adjust(p_values, "holm")


def p_adjust(p_values: np.ndarray, correction: str) -> np.ndarray:
    """p-values adjusted by `correction` (a statsmodels `multipletests` method: holm, bonferroni, fdr_bh; "none"
    returns them as they are)."""
    if correction == "none":
        return np.asarray(p_values, dtype=float)
    # statsmodels' Holm branch ends with a full gc.collect(), ~0.1 s in a Django process and nine families per
    # analysis; the numbers do not depend on it, so the collection is skipped for the duration of the call.
    collect = gc.collect
    gc.collect = lambda *args, **kwargs: 0
    try:
        return multipletests(p_values, method=correction)[1]
    finally:
        gc.collect = collect


def _line(scope, group, test, comparison, result: ChiSquare, share, base_share) -> dict:
    return {
        "scope": scope,
        "group": str(group),
        "test": test,
        "comparison": comparison,
        "n": result.n,
        "chi2": result.statistic,
        "dof": result.dof,
        "p": result.p,
        "cramers_v": result.cramers_v,
        "top_share": share,
        "top_share_baseline": base_share,
        "change": top_change(share, base_share) if share is not None else float("nan"),
        "min_expected": result.min_expected,
        "small_sample": not result.min_expected >= SMALL_SAMPLE_MIN_EXPECTED,  # NaN (not testable) too
        "p_exact": result.p_exact,
        "note": result.note,
        "procedure": "seed study's (ratings treated as independent)",
    }


# --- Bootstrap ------------------------------------------------------------------------------------------


def _participant_counts(rows: pd.DataFrame, scale: Scale) -> np.ndarray:
    """participants × scale-values count matrix of one condition."""
    return counts_table(rows, scale, ["participant_id"]).to_numpy(dtype=float)


BOOTSTRAP_BLOCK = 500


def _bootstrap_replicates(counts: np.ndarray, b: int, rng: np.random.Generator) -> np.ndarray:
    """B × values shares, each replicate resampling the n participants with replacement.

    Participants with the same answers are interchangeable, so they are collapsed into distinct answer patterns
    (a 10-item, 3-point batch has at most 66); drawing n participants with replacement is then exactly drawing
    the patterns' multiplicities from Multinomial(n, pattern frequency / n). No Python loop over replicates or
    participants, and memory grows with B × patterns, whatever the number of participants."""
    patterns, freq = np.unique(counts, axis=0, return_counts=True)
    n = int(freq.sum())
    out = np.empty((b, counts.shape[1]))
    for start in range(0, b, BOOTSTRAP_BLOCK):
        stop = min(b, start + BOOTSTRAP_BLOCK)
        weights = rng.multinomial(n, freq / n, size=stop - start)  # block × patterns
        totals = weights @ patterns
        out[start:stop] = totals / totals.sum(axis=1, keepdims=True)
    return out


def bootstrap_shares(
    rows: pd.DataFrame,
    scale: Scale,
    conditions: list[str],
    baseline: str,
    *,
    b: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    by: str | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Percentile bootstrap CIs, resampling PARTICIPANTS within each condition (their ratings are not independent).

    Returns (shares: group, condition, value label, share, ci_low, ci_high) and (change of the top share against
    the baseline: group, condition, change, ci_low, ci_high). Conditions are resampled independently (between
    subjects). Same seed, same rows → same intervals.
    """
    rng = np.random.default_rng(seed)
    lo_q, hi_q = (1 - level) / 2, 1 - (1 - level) / 2
    share_lines, change_lines = [], []
    groups = [("all", rows)] if by is None else sorted(rows.groupby(by), key=lambda g: str(g[0]))
    for group, sub in groups:
        reps: dict[str, np.ndarray] = {}
        observed: dict[str, np.ndarray] = {}
        for condition in conditions:
            part = sub[sub["condition"] == condition]
            if part.empty:
                continue
            counts = _participant_counts(part, scale)
            observed[condition] = counts.sum(axis=0) / counts.sum()
            reps[condition] = _bootstrap_replicates(counts, b, rng)
            low, high = np.quantile(reps[condition], [lo_q, hi_q], axis=0)
            for i, label in enumerate(scale.labels):
                share_lines.append(
                    {
                        "group": str(group),
                        "condition": condition,
                        "value": label,
                        "share": observed[condition][i],
                        "ci_low": low[i],
                        "ci_high": high[i],
                    }
                )
        if baseline not in reps:
            continue
        base_top = reps[baseline][:, -1]
        for condition in conditions:
            if condition == baseline or condition not in reps:
                continue
            with np.errstate(divide="ignore", invalid="ignore"):
                change = (reps[condition][:, -1] - base_top) / base_top
            change = change[np.isfinite(change)]
            low, high = np.quantile(change, [lo_q, hi_q]) if change.size else (np.nan, np.nan)
            change_lines.append(
                {
                    "group": str(group),
                    "condition": condition,
                    "change": top_change(observed[condition][-1], observed[baseline][-1]),
                    "ci_low": float(low),
                    "ci_high": float(high),
                }
            )
    return pd.DataFrame(share_lines), pd.DataFrame(change_lines)


# --- Agreement ------------------------------------------------------------------------------------------


@dataclass
class Agreement:
    applicable: bool
    alpha: float | None
    units: int
    pairable_ratings: int
    note: str
    alpha_nominal: float | None = None  # the same α with every disagreement counting alike


def agreement(rows: pd.DataFrame, scale: Scale) -> Agreement:
    """Krippendorff's alpha, ordinal and nominal, over responses rated more than once. Computed from the units ×
    values count matrix, so it costs the same whoever rated what."""
    per_unit = rows.groupby("response_id")["value"].size()
    multi = per_unit[per_unit >= 2].index
    if len(multi) == 0:
        return Agreement(False, None, 0, 0, "not applicable: one rating per response")
    counts = counts_table(rows[rows["response_id"].isin(multi)], scale, ["response_id"]).to_numpy()
    if len(np.unique(rows.loc[rows["response_id"].isin(multi), "value"])) < 2:
        return Agreement(
            False, None, len(multi), int(counts.sum()), "not defined: every rating has the same value"
        )
    import krippendorff

    alpha, nominal = (
        krippendorff.alpha(value_counts=counts, value_domain=list(scale.values), level_of_measurement=level)
        for level in ("ordinal", "nominal")
    )
    return Agreement(
        True,
        float(alpha),
        len(multi),
        int(counts.sum()),
        "ordinal (and nominal); responses rated at least twice",
        float(nominal),
    )
