"""How far an LLM judge agrees with people on the responses people rated, beside how far people agree.

Inputs are plain DataFrames: `human` with one row per human rating (response_id, rater, value, condition,
emotion, valence) and `judge` with one row per judged response (response_id, value). Nothing here reads the
database; judge ratings never enter any human statistic.

Agreement (`agreement_pair`)
----------------------------
* Judge–human: every human rating paired with the judge's rating of the same response. Krippendorff's α (ordinal)
  treats each pair as a unit with two coders; Cohen's weighted κ (linear and quadratic disagreement weights) is
  computed on the human × judge table. With one human rating per response both are the textbook two-rater figures.
* Human–human: responses rated by two or more people. α is the usual α over those responses; κ is computed on
  the symmetric table of every ordered pair of ratings of a response, each response weighing by its number of
  ratings (raters are exchangeable in a crowd design, so there is no "rater 1" and "rater 2").
* 95% percentile bootstrap CIs resample RESPONSES (all of a response's pairs together). Each response's 3×3
  contribution to the coincidence / confusion table is computed once; a replicate is a multinomial reweighting of
  responses, so B replicates cost one matrix product. α's ordinal metric is recomputed from each replicate's
  marginals. Point estimates: `krippendorff.alpha` (α) and the same closed form as statsmodels' `cohens_kappa`
  (κ); tests hold the bootstrap's formulas to both.

The alternative annotator test (Calderon, Reichart & Dror, ACL 2025) on responses with three or more human
ratings: see `analysis.alt_test`.

Bias checks
-----------
* Length: Spearman correlation of (judge − mean human rating) with the response's length in words, with a Fisher-z
  95% CI (SE 1.06/√(n−3), Fieller et al. 1957), beside the judge's and the people's own correlations with length.
* Condition (`condition_check`): does the judge rate one condition's responses differently from the baseline's
  AT THE SAME HUMAN RATING? It tests P(judge | human value, condition): for each human value v, the 2 × K table
  (this condition, the baseline) × judge value of the pairs where people said v, Pearson χ² (no correction); the
  strata's statistics and degrees of freedom are added (a stratified test of conditional independence, in the
  spirit of Cochran–Mantel–Haenszel for R × C tables), Holm over conditions. When a response has several human
  ratings its judge value enters several pairs, so the statistic is divided by Σ m_u² / Σ m_u (m_u: pairs of
  response u; 1 with one rating per response), a conservative design-effect correction. The size and direction:
  per human value, the judge's mean rating on this condition minus on the baseline (`shift_<value>`), and their
  average weighted by this condition's pairs (`shift`, scale points; positive = more lenient on this condition).
  Comparing mean (judge − human) gaps instead, as this check once did, mistakes a difference in base rates for
  bias: a judge that errs identically in every condition shows different gaps wherever people's ratings differ.

Verdict: the judge may screen models for this study when ALL of these hold (any unmet one is named):
1. at least `MIN_RESPONSES` (50) responses rated by both;
2. agreement: where human–human α exists, judge–human α ≥ human–human α (the judge agrees with people at least
   as well as people agree with each other); otherwise judge–human α's lower CI bound ≥ `ALPHA_FLOOR` (0.4);
3. the alternative annotator test passes (ω ≥ 0.5) where it applies;
4. no length bias: |r| < 0.1 or its CI includes 0;
5. no condition favoured: no condition's stratified test is significant at Holm p < 0.05 with a shift of
   ≥ 0.1 scale points at some human value (`shift_<value>`, strata with at least `MIN_STRATUM_PAIRS` pairs on
   both sides).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import krippendorff
import numpy as np
import pandas as pd
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from analysis.alt_test import AltTest, alternative_annotator_test
from analysis.stats import chi_square

MIN_RESPONSES = 50
ALPHA_FLOOR = 0.4
LENGTH_R_TOLERANCE = 0.1
CONDITION_GAP_TOLERANCE = 0.1
MIN_STRATUM_PAIRS = 10
BOOTSTRAP_BLOCK = 250


# --- Tables and coefficients ---------------------------------------------------------------------------------


def ordinal_alpha_from_coincidence(o: np.ndarray) -> np.ndarray:
    """Krippendorff's ordinal α from coincidence matrices (… × K × K), vectorised over leading axes."""
    o = np.asarray(o, dtype=float)
    nc = o.sum(axis=-1)  # … × K
    n = nc.sum(axis=-1)  # …
    cum = np.cumsum(nc, axis=-1)
    # δ²(c, k) = (Σ_{g=c..k} n_g − (n_c + n_k)/2)² for c ≤ k, symmetric.
    k = nc.shape[-1]
    lo, hi = np.minimum.outer(np.arange(k), np.arange(k)), np.maximum.outer(np.arange(k), np.arange(k))
    between = np.take(cum, hi, axis=-1) - np.take(cum, lo, axis=-1) + np.take(nc, lo, axis=-1)
    delta2 = (between - (nc[..., :, None] + nc[..., None, :]) / 2) ** 2
    observed = (o * delta2).sum(axis=(-1, -2))
    expected = (nc[..., :, None] * nc[..., None, :] * delta2).sum(axis=(-1, -2))
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1 - (n - 1) * observed / expected


def weighted_kappa(table: np.ndarray, weights: str) -> np.ndarray:
    """Cohen's weighted κ of (… × K × K) rater-1 × rater-2 count tables; weights "linear" or "quadratic"."""
    t = np.asarray(table, dtype=float)
    k = t.shape[-1]
    d = np.abs(np.subtract.outer(np.arange(k), np.arange(k))).astype(float)
    w = {"linear": d, "quadratic": d**2}[weights]
    p = t / t.sum(axis=(-1, -2), keepdims=True)
    chance = p.sum(axis=-1)[..., :, None] * p.sum(axis=-2)[..., None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1 - (w * p).sum(axis=(-1, -2)) / (w * chance).sum(axis=(-1, -2))


def _unit_coincidences(counts: np.ndarray) -> np.ndarray:
    """units × K × K coincidence contributions of units × K value counts (units with < 2 values give zero)."""
    m = counts.sum(axis=1)
    outer = counts[:, :, None] * counts[:, None, :] - np.einsum("uk,kl->ukl", counts, np.eye(counts.shape[1]))
    scale = np.where(m > 1, 1 / np.maximum(m - 1, 1), 0.0)
    return outer * scale[:, None, None]


def _bootstrap(parts: np.ndarray, b: int, rng: np.random.Generator) -> np.ndarray:
    """B × K × K tables, each a resample (with replacement) of the units' contributions `parts` (U × K × K)."""
    u = parts.shape[0]
    flat = parts.reshape(u, -1)
    out = np.empty((b, flat.shape[1]))
    for start in range(0, b, BOOTSTRAP_BLOCK):
        stop = min(b, start + BOOTSTRAP_BLOCK)
        out[start:stop] = rng.multinomial(u, np.full(u, 1 / u), size=stop - start) @ flat
    return out.reshape(b, *parts.shape[1:])


@dataclass
class Coefficient:
    value: float
    ci_low: float
    ci_high: float


@dataclass
class AgreementPair:
    units: int  # responses
    ratings: int
    alpha: Coefficient | None = None
    kappa_linear: Coefficient | None = None
    kappa_quadratic: Coefficient | None = None
    note: str = ""


def _coefficient(value: float, replicates: np.ndarray, level: float) -> Coefficient:
    replicates = replicates[np.isfinite(replicates)]
    if not replicates.size:
        return Coefficient(float(value), float("nan"), float("nan"))
    low, high = np.quantile(replicates, [(1 - level) / 2, 1 - (1 - level) / 2])
    return Coefficient(float(value), float(low), float(high))


def _positions(values: pd.Series, scale: list[int]) -> np.ndarray:
    index = {v: i for i, v in enumerate(scale)}
    unknown = sorted(set(values) - set(index))
    if unknown:
        raise ValueError(f"values {unknown} are not on the scale {scale}")
    return values.map(index).to_numpy(dtype=int)


def judge_human_agreement(
    pairs: pd.DataFrame, scale: list[int], *, b: int = 1000, seed: int = 0, level: float = 0.95
) -> AgreementPair:
    """α and weighted κ of the judge against people on `pairs` (response_id, human, judge)."""
    k = len(scale)
    responses = pairs["response_id"].nunique()
    out = AgreementPair(units=responses, ratings=len(pairs))
    if len(pairs) < 2 or pd.concat([pairs["human"], pairs["judge"]]).nunique() < 2:
        out.note = "not defined: fewer than two pairs or a single value throughout"
        return out
    h, j = _positions(pairs["human"], scale), _positions(pairs["judge"], scale)
    unit = pd.factorize(pairs["response_id"])[0]
    confusion = np.zeros((responses, k, k))
    np.add.at(confusion, (unit, h, j), 1.0)
    coincidence = confusion + confusion.transpose(0, 2, 1)  # each pair: both orders, m_u − 1 = 1
    rng = np.random.default_rng(seed)
    reps = _bootstrap(np.concatenate([confusion, coincidence], axis=1), b, rng)
    conf_reps, coin_reps = reps[:, :k], reps[:, k:]
    alpha = krippendorff.alpha(
        reliability_data=np.vstack([h, j]).astype(float),
        value_domain=list(range(k)),
        level_of_measurement="ordinal",
    )
    out.alpha = _coefficient(alpha, ordinal_alpha_from_coincidence(coin_reps), level)
    total = confusion.sum(axis=0)
    out.kappa_linear = _coefficient(
        weighted_kappa(total, "linear"), weighted_kappa(conf_reps, "linear"), level
    )
    out.kappa_quadratic = _coefficient(
        weighted_kappa(total, "quadratic"), weighted_kappa(conf_reps, "quadratic"), level
    )
    return out


def human_human_agreement(
    human: pd.DataFrame, scale: list[int], *, b: int = 1000, seed: int = 0, level: float = 0.95
) -> AgreementPair:
    """α and weighted κ among people, on responses rated at least twice (module doc)."""
    per = human.groupby("response_id")["value"].size()
    multi = human[human["response_id"].isin(per[per >= 2].index)]
    out = AgreementPair(units=multi["response_id"].nunique(), ratings=len(multi))
    if out.units == 0:
        out.note = "not applicable: one human rating per response"
        return out
    if multi["value"].nunique() < 2:
        out.note = "not defined: every rating has the same value"
        return out
    k = len(scale)
    counts = np.zeros((out.units, k))
    np.add.at(counts, (pd.factorize(multi["response_id"])[0], _positions(multi["value"], scale)), 1.0)
    parts = _unit_coincidences(counts)
    reps = _bootstrap(parts, b, np.random.default_rng(seed))
    alpha = krippendorff.alpha(
        value_counts=counts, value_domain=list(range(k)), level_of_measurement="ordinal"
    )
    out.alpha = _coefficient(alpha, ordinal_alpha_from_coincidence(reps), level)
    total = parts.sum(axis=0)
    out.kappa_linear = _coefficient(weighted_kappa(total, "linear"), weighted_kappa(reps, "linear"), level)
    out.kappa_quadratic = _coefficient(
        weighted_kappa(total, "quadratic"), weighted_kappa(reps, "quadratic"), level
    )
    out.note = "responses rated at least twice"
    return out


# --- Bias checks ----------------------------------------------------------------------------------------------


@dataclass
class Correlation:
    r: float
    ci_low: float
    ci_high: float
    n: int


def spearman_ci(x, y, level: float = 0.95) -> Correlation:
    """Spearman's r with a Fisher-z CI (SE 1.06/√(n−3), Fieller, Hartley & Pearson 1957)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = x.size
    if n < 4 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return Correlation(float("nan"), float("nan"), float("nan"), n)
    r = float(sps.spearmanr(x, y).statistic)
    z, half = (
        np.arctanh(np.clip(r, -0.999999, 0.999999)),
        sps.norm.ppf(1 - (1 - level) / 2) * 1.06 / np.sqrt(n - 3),
    )
    return Correlation(r, float(np.tanh(z - half)), float(np.tanh(z + half)), n)


def length_bias(per_response: pd.DataFrame) -> dict[str, Correlation]:
    """Correlations with length (words) of the judge, of people (mean per response) and of judge − people."""
    d = per_response.dropna(subset=["words"])
    return {
        "judge_minus_human": spearman_ci(d["words"], d["judge"] - d["human_mean"]),
        "judge": spearman_ci(d["words"], d["judge"]),
        "human": spearman_ci(d["words"], d["human_mean"]),
    }


def condition_check(pairs: pd.DataFrame, scale: list[int], baseline: str | None) -> pd.DataFrame:
    """Per condition against the baseline (against every other condition when there is none): the stratified
    χ² of P(judge | human value, condition) and the judge's shift at the same human value (module doc)."""
    sizes = pairs.groupby("response_id")["human"].transform("size").to_numpy(float)
    pairs = pairs.assign(_m=sizes)
    lines = []
    for condition, mine in pairs.groupby("condition", sort=True):
        other = pairs[pairs["condition"] == baseline] if baseline else pairs.drop(mine.index)
        line: dict = {"condition": condition, "responses": mine["response_id"].nunique(), "pairs": len(mine)}
        line.update(vs=None, chi2=np.nan, dof=0, p=np.nan, shift=np.nan, max_shift=np.nan)
        if condition == baseline or other.empty:
            lines.append(line)
            continue
        line["vs"] = baseline or "other conditions"
        statistic, dof, shifts, weights = 0.0, 0, {}, {}
        for v in scale:
            a, b = mine[mine["human"] == v], other[other["human"] == v]
            if len(a) and len(b):
                table = np.array([[(x["judge"] == u).sum() for u in scale] for x in (a, b)])
                test = chi_square(table, yates=False)
                if np.isfinite(test.statistic):
                    statistic, dof = statistic + test.statistic, dof + test.dof
            if len(a) >= MIN_STRATUM_PAIRS and len(b) >= MIN_STRATUM_PAIRS:
                shifts[v] = float(a["judge"].mean() - b["judge"].mean())
                weights[v] = len(a)
            line[f"shift_{v}"] = shifts.get(v, np.nan)
        both = pd.concat([mine, other])
        deff = float((both["_m"] ** 2).sum() / both["_m"].sum()) if len(both) else 1.0
        if dof:
            line.update(chi2=statistic / deff, dof=dof, p=float(sps.chi2.sf(statistic / deff, dof)))
        if shifts:
            total = sum(weights.values())
            line["shift"] = sum(shifts[v] * weights[v] for v in shifts) / total
            line["max_shift"] = max(shifts.values(), key=abs)
        lines.append(line)
    table = pd.DataFrame(lines)
    table["p_holm"] = np.nan
    tested = table["p"].notna()
    if tested.any():
        table.loc[tested, "p_holm"] = multipletests(table.loc[tested, "p"], method="holm")[1]
    return table


# --- The report -----------------------------------------------------------------------------------------------


@dataclass
class Calibration:
    responses: int
    judge_human: AgreementPair
    human_human: AgreementPair
    confusion: pd.DataFrame
    by_valence: pd.DataFrame
    by_emotion: pd.DataFrame
    alt_test: AltTest
    length: dict[str, Correlation] | None
    conditions: pd.DataFrame
    may_screen: bool
    reasons: list[str]
    verdict: str
    # Per scale value: Pearson ρ of [person chose it] with [judge chose it] over the pairs, what PPI's variance
    # reduction (1 − ρ²·N/(N+n)) and analysis.power's `judge_correlation` take.
    indicator_correlations: dict[int, float] = field(default_factory=dict)


def _check(human: pd.DataFrame, judge: pd.DataFrame) -> None:
    for name, frame, columns in (
        ("human", human, {"response_id", "rater", "value", "condition", "emotion", "valence"}),
        ("judge", judge, {"response_id", "value"}),
    ):
        missing = columns - set(frame.columns)
        if missing:
            raise ValueError(f"{name} ratings need columns {sorted(missing)}")
    if judge["response_id"].duplicated().any():
        raise ValueError("one judge rating per response: aggregate the judge's samples first")
    if human.duplicated(["response_id", "rater"]).any():
        raise ValueError("a rater rated the same response twice")


def pairs_frame(human: pd.DataFrame, judge: pd.DataFrame) -> pd.DataFrame:
    """Every human rating of a judged response with the judge's value beside it."""
    pairs = human.merge(judge.rename(columns={"value": "judge"}), on="response_id", how="inner")
    return pairs.rename(columns={"value": "human"})


def _breakdown(pairs: pd.DataFrame, human: pd.DataFrame, by: str, scale, b: int, seed: int) -> pd.DataFrame:
    lines = []
    for group, sub in sorted(pairs.groupby(by), key=lambda g: str(g[0])):
        jh = judge_human_agreement(sub, scale, b=b, seed=seed)
        hh = human_human_agreement(human[human[by] == group], scale, b=b, seed=seed)
        lines.append(
            {
                by: group,
                "responses": jh.units,
                "pairs": jh.ratings,
                **_flat("judge_human", jh),
                **_flat("human_human", hh),
            }
        )
    return pd.DataFrame(lines)


def _flat(prefix: str, pair: AgreementPair) -> dict[str, float]:
    out = {}
    for name in ("alpha", "kappa_linear", "kappa_quadratic"):
        c = getattr(pair, name)
        out[f"{prefix}_{name}"] = c.value if c else np.nan
        out[f"{prefix}_{name}_ci_low"] = c.ci_low if c else np.nan
        out[f"{prefix}_{name}_ci_high"] = c.ci_high if c else np.nan
    return out


def calibrate(
    *,
    human: pd.DataFrame,
    judge: pd.DataFrame,
    scale: list[int],
    baseline: str | None = None,
    words: pd.Series | None = None,
    b: int = 1000,
    seed: int = 0,
    epsilon: float = 0.1,
) -> Calibration:
    """The whole calibration report on plain DataFrames (module doc). `words`: response length in words,
    indexed by response_id (None: no length check). Same inputs and seed, same numbers."""
    _check(human, judge)
    scale = sorted(scale)
    pairs = pairs_frame(human, judge)
    judged_human = human[human["response_id"].isin(judge["response_id"])]
    jh = judge_human_agreement(pairs, scale, b=b, seed=seed)
    hh = human_human_agreement(judged_human, scale, b=b, seed=seed + 1)
    confusion = pd.crosstab(pairs["human"], pairs["judge"]).reindex(index=scale, columns=scale, fill_value=0)
    confusion.index.name, confusion.columns.name = "human", "judge"
    per_response = pairs.groupby("response_id").agg(
        condition=("condition", "first"), human_mean=("human", "mean"), judge=("judge", "first")
    )
    length = None
    if words is not None:
        length = length_bias(per_response.assign(words=words.reindex(per_response.index)))
    conditions = condition_check(pairs, scale, baseline)
    alt = alternative_annotator_test(
        judged_human, judge.set_index("response_id")["value"], epsilon=epsilon, seed=seed
    )
    result = Calibration(
        responses=jh.units,
        judge_human=jh,
        human_human=hh,
        confusion=confusion,
        by_valence=_breakdown(pairs, judged_human, "valence", scale, b, seed),
        by_emotion=_breakdown(pairs, judged_human, "emotion", scale, b, seed),
        alt_test=alt,
        length=length,
        conditions=conditions,
        may_screen=False,
        reasons=[],
        verdict="",
    )
    result.indicator_correlations = indicator_correlations(pairs, scale)
    _verdict(result)
    return result


def indicator_correlations(pairs: pd.DataFrame, scale: list[int]) -> dict[int, float]:
    """ρ(1[human = v], 1[judge = v]) for each scale value v (NaN when either never or always chose v)."""
    out = {}
    for v in scale:
        y, f = (pairs["human"] == v).to_numpy(float), (pairs["judge"] == v).to_numpy(float)
        out[v] = float(np.corrcoef(y, f)[0, 1]) if y.std() > 0 and f.std() > 0 else float("nan")
    return out


def _verdict(c: Calibration) -> None:
    """Fills may_screen, reasons and the one verdict line (criteria in the module doc)."""
    reasons = []
    if c.responses < MIN_RESPONSES:
        reasons.append(f"only {c.responses} responses rated by both (needs {MIN_RESPONSES})")
    jh, hh = c.judge_human.alpha, c.human_human.alpha
    if jh is None:
        reasons.append("judge–human α is not defined")
    elif hh is not None and np.isfinite(hh.value):
        if jh.value < hh.value:
            reasons.append(f"judge–human α {jh.value:.2f} is below human–human α {hh.value:.2f}")
    elif not jh.ci_low >= ALPHA_FLOOR:
        reasons.append(f"judge–human α's lower bound {jh.ci_low:.2f} is below {ALPHA_FLOOR}")
    if c.alt_test.applicable and not c.alt_test.passed:
        reasons.append(f"fails the alternative annotator test (ω = {c.alt_test.winning_rate:.2f} < 0.5)")
    gap = c.length["judge_minus_human"] if c.length else None
    if (
        gap is not None
        and np.isfinite(gap.r)
        and abs(gap.r) >= LENGTH_R_TOLERANCE
        and (gap.ci_low > 0 or gap.ci_high < 0)
    ):
        side = "longer" if gap.r > 0 else "shorter"
        reasons.append(f"favours {side} responses (r = {gap.r:.2f} of judge − human with length)")
    favoured = c.conditions[
        (c.conditions["p_holm"] < 0.05) & (c.conditions["max_shift"].abs() >= CONDITION_GAP_TOLERANCE)
    ]
    for _, line in favoured.iterrows():
        side = "more leniently" if line["max_shift"] > 0 else "more harshly"
        reasons.append(
            f"rates {line['condition']} {side} than {line['vs']} at the same human rating (up to "
            f"{line['max_shift']:+.2f} points; stratified χ² Holm p = {line['p_holm']:.2g})"
        )
    c.reasons, c.may_screen = reasons, not reasons
    alpha_text = f"judge–human α {jh.value:.2f}" if jh else "judge–human α n/a"
    if hh is not None:
        alpha_text += f" vs human–human {hh.value:.2f}"
    alt_text = f"alt-test ω {c.alt_test.winning_rate:.2f}" if c.alt_test.applicable else "alt-test n/a"
    if c.may_screen:
        c.verdict = f"MAY SCREEN: this judge may screen models for this study ({alpha_text}; {alt_text})."
    else:
        c.verdict = f"MAY NOT SCREEN: {'; '.join(reasons)} ({alpha_text}; {alt_text})."
