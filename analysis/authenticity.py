"""The authenticity sensitivity line of a rating study: does the headline depend on the participants the
authenticity score flags (studies/authenticity.py), and are they flagged evenly across conditions?

Shown whether or not the study declared the `authenticity` exclusion rule: with it declared, the main analysis
already drops them (and the differential-exclusion test of every rule covers it, analysis/exclusions.py); without
it, this line says what dropping them would change. Both sides apply the study's other rules.
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd

from analysis import stats
from analysis.exclusions import (
    ExclusionRules,
    exclusion_rate_test,
    participant_exclusion_flags,
    sensitivity_sentences,
    sensitivity_table,
)


def authenticity_sensitivity(
    rows: pd.DataFrame,
    rules: ExclusionRules,
    scale: stats.Scale,
    conditions: list[str],
    baseline: str,
    *,
    alpha: float,
    seed: int = 0,
) -> tuple[pd.DataFrame, list[str]]:
    """(table, sentences): the headline with and without the flagged participants (flagged and not cleared in
    review, or confirmed), after the study's other exclusion rules; and the test of whether the flag rates differ
    between conditions (the differential-exclusion test)."""
    if rows.empty:
        return pd.DataFrame(), []
    others = participant_exclusion_flags(rows, dataclasses.replace(rules, authenticity=False))
    base = rows[~rows["participant_id"].isin(others.index[others["excluded"]])]
    per = base.groupby("participant_id").agg(
        condition=("condition", "first"), flagged=("authenticity_excluded", "any")
    )
    flagged = per.index[per["flagged"]]
    if len(flagged) == 0:
        return pd.DataFrame(), [
            "No participant is flagged by the authenticity score: the headline does not depend on it."
        ]
    without = base[~base["participant_id"].isin(flagged)]
    table = sensitivity_table(base, without, scale, conditions, baseline, alpha=alpha)
    lines = sensitivity_sentences(
        table,
        scale,
        baseline,
        alpha=alpha,
        leads=(
            f"With the {len(flagged)} participants the authenticity score flags",
            "Without them",
        ),
        subject="the participants the authenticity score flags",
    )
    counts = per.loc[per["flagged"], "condition"].value_counts().reindex(conditions, fill_value=0)
    totals = per["condition"].value_counts().reindex(conditions, fill_value=0)
    test = exclusion_rate_test(list(counts), list(totals), seed=seed)
    rates = ", ".join(f"{c} {int(counts[c])}/{int(totals[c])}" for c in conditions)
    if test.test and not math.isnan(test.p):
        verdict = "differ" if test.p < alpha else "do not differ"
        lines.append(
            f"Authenticity flags by condition: {rates}; they {verdict} between conditions ({test.test} "
            f"p = {test.p:.2g}, α = {alpha:g})."
        )
    else:
        lines.append(f"Authenticity flags by condition: {rates}; {test.note or 'not tested'}.")
    return table, lines
