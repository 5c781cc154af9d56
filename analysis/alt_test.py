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
participants qualify, annotators are COMBINED as the paper's FAQ describes for annotators of disjoint sets: each
response's ratings are put in a seeded random order and "annotator k" is the k-th rating of every response
(`annotators` says which was used).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests


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
        # Combined annotators (the paper's FAQ): the k-th rating, in a seeded random order, of every response.
        rng = np.random.default_rng(seed)
        rows = rows.iloc[rng.permutation(len(rows))]
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
    result.applicable = True
    result.per_annotator = table
    result.winning_rate = float(table["reject"].mean())
    result.advantage_probability = float(table["rho_judge"].mean())
    result.passed = result.winning_rate >= 0.5
    return result
