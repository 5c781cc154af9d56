"""The alternative annotator test (Calderon, Reichart & Dror, ACL 2025: "The Alternative Annotator Test for
LLM-as-a-Judge: How to Statistically Justify Replacing Human Annotators with LLMs"), on plain DataFrames.

On responses with ≥ 3 human ratings: leave one annotator out; on each of their responses score how well the judge
and the left-out annotator represent the remaining annotators (default: negative RMSE, suited to an ordinal scale;
"accuracy" = share of the others who chose the same value); W_f = [judge ≥ annotator], W_h = [annotator ≥ judge]
(ties count for both). Per annotator, a one-sided paired t-test of H0: mean(W_h − W_f) ≥ ε against the
alternative that the judge's advantage probability ρ_f exceeds the annotator's minus ε; Benjamini–Yekutieli over
annotators at q; the winning rate ω is the share of annotators whose H0 is rejected; the judge passes when
ω ≥ 0.5. ε defaults to 0.1, the paper's advice for crowd workers (0.15 skilled annotators, 0.2 experts).

The paper asks for ≥ 30 responses per annotator; crowd participants rate about ten, so when fewer than three
participants qualify, annotators are COMBINED as the paper's FAQ describes for annotators of disjoint sets:
"annotator k" is the k-th rating of every response in a random order of each response's ratings
(`annotators` says which was used). One such order is arbitrary, and in a crowd design (400 responses × 3–5
ratings) ω then ranges from 0.0 to 0.8 over seeds. So the combined mode AVERAGES OVER PAIRINGS, as the authors
suggest: the scores W_f, W_h of each rating do not depend on the order (the left-out rating against the rest of
its response), only the grouping into slots does; `PAIRINGS` random orders are drawn (vectorised), each gives its
slots' t-tests, Benjamini–Yekutieli and ω, and the reported ω is their mean (the judge passes when it is ≥ 0.5).
Per slot the table gives the mean ρ's and p over pairings and the share of pairings in which its H0 was rejected.
With 2,000 pairings ω's spread over seeds is below 0.05 (bench/inference.py measures it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

PAIRINGS = 2000


@dataclass
class AltTest:
    applicable: bool
    annotators: str = ""  # "raters" or "combined"
    epsilon: float = 0.1
    q: float = 0.05
    winning_rate: float | None = None
    advantage_probability: float | None = None
    passed: bool | None = None
    per_annotator: pd.DataFrame = field(default_factory=pd.DataFrame)
    note: str = ""


def _alignment(scores: str, a: np.ndarray, rest_sum, rest_sq, rest_n, rest_same) -> np.ndarray:
    if scores == "accuracy":
        return rest_same / rest_n
    if scores == "neg_rmse":
        return -np.sqrt((rest_sq - 2 * a * rest_sum + rest_n * a * a) / rest_n)
    raise ValueError(f"unknown alignment score {scores!r} (accuracy or neg_rmse)")


def alternative_annotator_test(
    human: pd.DataFrame,
    judge: pd.Series,
    *,
    epsilon: float = 0.1,
    q: float = 0.05,
    min_humans: int = 3,
    min_instances: int = 30,
    min_annotators: int = 3,
    scores: str = "neg_rmse",
    seed: int = 0,
    pairings: int = PAIRINGS,
) -> AltTest:
    """The alt-test (module doc). `judge`: the judge's value indexed by response_id."""
    per = human.groupby("response_id")["value"].size()
    keep = per[(per >= min_humans) & per.index.isin(judge.index)].index
    rows = human[human["response_id"].isin(keep)][["response_id", "rater", "value"]].copy()
    result = AltTest(applicable=False, epsilon=epsilon, q=q)
    if rows.empty:
        result.note = f"not applicable: no judged response has {min_humans} or more human ratings"
        return result
    rows["annotator"] = rows["rater"].astype(str)
    result.annotators = "raters"
    enough = rows.groupby("annotator")["response_id"].size()
    if (enough >= min_instances).sum() < min_annotators:
        # Combined annotators (the paper's FAQ): slot k holds the k-th rating of every response; how many
        # responses each slot has does not depend on the order.
        rows = rows.sort_values(["response_id"], kind="stable")
        rows["annotator"] = "slot " + (rows.groupby("response_id").cumcount() + 1).astype(str)
        result.annotators = "combined"
        enough = rows.groupby("annotator")["response_id"].size()
    qualified = enough[enough >= min_instances].index
    if len(qualified) < min_annotators:
        result.note = (
            f"not applicable: fewer than {min_annotators} annotators with {min_instances} or more responses "
            f"having {min_humans}+ ratings"
        )
        return result
    value = rows["value"].to_numpy(float)
    f = judge.reindex(rows["response_id"]).to_numpy(float)
    rows["sq"], rows["agrees_with_judge"] = value**2, (value == f).astype(float)
    totals = rows.groupby("response_id")[["value", "sq", "agrees_with_judge"]].transform("sum")
    total_n = rows.groupby("response_id")["value"].transform("size").to_numpy(float)
    same_as_self = rows.groupby(["response_id", "value"])["value"].transform("size").to_numpy(float)
    rest = (totals["value"].to_numpy(float) - value, totals["sq"].to_numpy(float) - value**2, total_n - 1)
    # the others (not this annotator) who chose the judge's value
    judge_same = totals["agrees_with_judge"].to_numpy(float) - rows["agrees_with_judge"].to_numpy()
    s_f = _alignment(scores, f, *rest, judge_same)
    s_h = _alignment(scores, value, *rest, same_as_self - 1)
    rows["w_f"], rows["w_h"] = (s_f >= s_h).astype(float), (s_h >= s_f).astype(float)
    result.applicable = True
    if result.annotators == "combined":
        table, omega = _combined(rows, len(qualified), epsilon, q, pairings, seed)
        result.per_annotator, result.winning_rate = table, omega
        result.advantage_probability = float(table["rho_judge"].mean())
        result.passed = omega >= 0.5
        return result
    lines = []
    for annotator, sub in rows[rows["annotator"].isin(qualified)].groupby("annotator", sort=True):
        d = (sub["w_h"] - sub["w_f"]).to_numpy()
        if d.std() == 0:
            p = 0.0 if d.mean() < epsilon else 1.0  # a constant difference: the t-test is degenerate
        else:
            p = float(sps.ttest_1samp(d, epsilon, alternative="less").pvalue)
        lines.append(
            {
                "annotator": annotator,
                "responses": len(sub),
                "rho_judge": sub["w_f"].mean(),
                "rho_human": sub["w_h"].mean(),
                "p": p,
            }
        )
    table = pd.DataFrame(lines)
    table["reject"] = multipletests(table["p"].to_numpy(), alpha=q, method="fdr_by")[0]
    result.per_annotator = table
    result.winning_rate = float(table["reject"].mean())
    result.advantage_probability = float(table["rho_judge"].mean())
    result.passed = result.winning_rate >= 0.5
    return result


def _one_sided_p(d_sum, d_sq, n, epsilon):
    """p of the one-sided t-test of H0: mean(d) ≥ ε, from sums (arrays); a constant d: 0 or 1."""
    mean = d_sum / n
    variance = np.maximum(d_sq - n * mean**2, 0.0) / (n - 1)
    sd = np.sqrt(variance)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (mean - epsilon) / (sd / np.sqrt(n))
    p = sps.t.cdf(t, n - 1)
    constant = sd < 1e-12
    return np.where(constant, np.where(mean < epsilon, 0.0, 1.0), p)


def _by_reject(p: np.ndarray, q: float) -> np.ndarray:
    """Benjamini–Yekutieli step-up over the last axis (statsmodels' "fdr_by", vectorised over pairings)."""
    m = p.shape[-1]
    order = np.argsort(p, axis=-1)
    ranked = np.take_along_axis(p, order, axis=-1)
    thresholds = np.arange(1, m + 1) * q / (m * np.sum(1.0 / np.arange(1, m + 1)))
    below = ranked <= thresholds
    last = np.where(below.any(axis=-1), m - 1 - np.argmax(below[..., ::-1], axis=-1), -1)
    rejected_sorted = np.arange(m) <= last[..., None]
    out = np.empty_like(rejected_sorted)
    np.put_along_axis(out, order, rejected_sorted, axis=-1)
    return out


def _combined(rows: pd.DataFrame, slots: int, epsilon, q, pairings, seed) -> tuple[pd.DataFrame, float]:
    """The combined-annotator test averaged over `pairings` random orders of each response's ratings (module doc).
    Slots 1..`slots` are the qualified ones (every response has at least as many ratings as the test needs)."""
    response = pd.factorize(rows["response_id"])[0]
    d = (rows["w_h"] - rows["w_f"]).to_numpy()
    order = np.argsort(response, kind="stable")
    response, d = response[order], d[order]
    w_f, w_h = rows["w_f"].to_numpy()[order], rows["w_h"].to_numpy()[order]
    start = np.searchsorted(response, response)  # first position of each rating's response
    rng = np.random.default_rng(seed)
    lines = {k: {"rho_judge": 0.0, "rho_human": 0.0, "p": 0.0, "reject": 0.0} for k in range(slots)}
    omega = 0.0
    block = 250
    for begin in range(0, pairings, block):
        size = min(block, pairings - begin)
        keys = response + rng.random((size, response.size))
        ranks = np.argsort(keys, axis=1)
        slot = np.empty_like(ranks)
        np.put_along_axis(slot, ranks, np.arange(response.size) - start, axis=1)  # rank within its response
        p = np.empty((size, slots))
        for k in range(slots):
            mask = slot == k
            n = mask.sum(axis=1)
            p[:, k] = _one_sided_p(mask @ d, mask @ (d * d), n, epsilon)
            lines[k]["rho_judge"] += float((mask @ w_f / n).sum())
            lines[k]["rho_human"] += float((mask @ w_h / n).sum())
            lines[k]["p"] += float(p[:, k].sum())
        reject = _by_reject(p, q)
        omega += float(reject.mean(axis=1).sum())
        for k in range(slots):
            lines[k]["reject"] += float(reject[:, k].sum())
    counts = np.bincount(np.bincount(response))  # responses by number of ratings
    responses_with = counts[::-1].cumsum()[::-1]  # responses with at least k ratings, k = 0, 1, ...
    table = pd.DataFrame(
        [
            {
                "annotator": f"slot {k + 1}",
                "responses": int(responses_with[k + 1]),
                **{name: value / pairings for name, value in lines[k].items()},
            }
            for k in range(slots)
        ]
    )
    table = table.rename(columns={"reject": "reject_share"})
    table["reject"] = table["reject_share"] >= 0.5
    return table, omega / pairings
