"""The rating kind's power before launch (its `StudyKind.power_planner`, asked through
analysis/study_power.py): `rating_power_plan` takes its conditions, items per participant and expected shares, fed to
`analysis.power.power_plan`. Only reads.

Expected shares, per condition (each overridable):
* the baseline: its observed Bad/Okay/Good shares when it has at least `MIN_OBSERVED_RATINGS` counted ratings
  after the default exclusion rules; otherwise the seed study's published human shares;
* every other condition: the seed study's published GPT-4 shares (`chatgpt_empathy`), i.e. "an effect as large
  as the seed study found". A study of another scale has no published shares: give them explicitly.
α: the rating analysis's default, 0.05 (the seed study's); `Study.significance_level` belongs to the
questionnaire kind and is not used here.

Design effect (participants give several ratings, analysis.clustered), applied by default, first that applies:
* `design_effect` given (the `--design-effect` flag): as given;
* `icc` given (`--icc`, or the launch page's stored baseline for a wave): 1 + (items − 1)·ICC;
* the baseline's counted ratings, when there are at least `MIN_OBSERVED_RATINGS` of them from two or more
  participants: the within-rater ICC of the top value estimated on them (`icc_anova`);
* otherwise the seed study's largest within-rater ICC (`power.SEED_ICC`, 0.116 for chatgpt): conservative, since
  people rating LLM responses agreed with themselves more than those rating people's.
The plan says which (`design_effect_source`). One design effect serves both sides of each comparison: when the
other conditions are expected to cluster more than the baseline (as the seed study's LLM conditions did), give
`--icc`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from analysis import exclusions, power, stats
from analysis.power import baseline_icc
from analysis.services import study_alpha
from analysis.study_power import StudyPower, StudyPowerError, design_effect_choose, planned_conditions
from studies.models import Study

from .frame import rating_rows_frame

MIN_OBSERVED_RATINGS = 30


def _counted_ratings(study: Study) -> pd.DataFrame:
    """The study's counted ratings after its declared exclusion rules, as its analysis will apply them."""
    rows = rating_rows_frame(study=study)
    if rows.empty:
        return rows
    rules = exclusions.ExclusionRules.from_declared(study.exclusion_rules)
    conditions = [str(c) for c in rows["condition"].unique()]
    kept, _, _ = exclusions.exclusions_apply(
        rows, rules, conditions=conditions, alpha=study_alpha(study=study)
    )
    return kept


def _observed_shares(kept: pd.DataFrame, scale: stats.Scale) -> dict[str, tuple[list[float], int]]:
    if kept.empty:
        return {}
    counts = stats.counts_table(kept, scale, ["condition"])
    return {
        str(name): ((row / row.sum()).tolist(), int(row.sum()))
        for name, row in counts.iterrows()
        if row.sum()
    }


def rating_power_plan(
    *,
    study: Study,
    alpha: float | None = None,
    powers: Sequence[float] = power.DEFAULT_POWERS,
    items_per_participant: int | None = None,
    design_effect: float | None = None,
    icc: float | None = None,
    icc_source: str = "given",
    shares: Mapping[str, Sequence[float]] | None = None,
    alternative_shares: Sequence[float] | None = None,
    judge_correlation: float | None = None,
    judge_ratio: float | None = None,
) -> StudyPower:
    """Participants per condition for the planned tests of rating study `study` (module doc for the defaults).

    shares: explicit expected shares by condition name (ascending scale), taking precedence over everything;
    alternative_shares: the expected shares of every non-baseline condition without explicit ones;
    design_effect / icc: as the module doc says (None: chosen)."""
    names, baseline = planned_conditions(study)
    explicit = dict(shares or {})
    unknown = sorted(set(explicit) - set(names))
    if unknown:
        raise StudyPowerError(f"shares given for {unknown}, which are not conditions of this study ({names})")
    scale = stats.Scale.from_study_scale(study.scale)
    seeded = len(scale.values) == len(power.SEED_SHARES[power.SEED_BASELINE])
    needs_ratings = baseline not in explicit or (design_effect is None and icc is None)
    kept = _counted_ratings(study) if needs_ratings else pd.DataFrame()
    observed = _observed_shares(kept, scale) if baseline not in explicit else {}
    chosen: dict[str, list[float]] = {}
    sources: dict[str, str] = {}
    for name in names:
        if name in explicit:
            chosen[name], sources[name] = list(explicit[name]), "given"
        elif name == baseline and observed.get(name, ([], 0))[1] >= MIN_OBSERVED_RATINGS:
            chosen[name] = observed[name][0]
            sources[name] = f"observed ({observed[name][1]} ratings)"
        elif name != baseline and alternative_shares is not None:
            chosen[name], sources[name] = list(alternative_shares), "given (all conditions)"
        elif seeded:
            seed_name = power.SEED_BASELINE if name == baseline else power.SEED_ALTERNATIVE
            chosen[name] = list(power.SEED_SHARES[seed_name])
            sources[name] = f"seed study ({seed_name})"
        else:
            raise StudyPowerError(
                f"no expected shares for {name!r}: the study's scale has {len(scale.values)} values and the "
                "seed study's published shares have 3; give them explicitly"
            )
    items = study.items_per_participant if items_per_participant is None else items_per_participant
    alpha = power.DEFAULT_ALPHA if alpha is None else alpha
    mine = kept[kept["condition"] == baseline] if not kept.empty else kept
    observed_icc = (
        baseline_icc(mine["value"], mine["participant_id"], scale.top) if not mine.empty else float("nan")
    )
    design_effect, icc, icc_source = design_effect_choose(
        design_effect=design_effect, icc=icc, icc_source=icc_source, observed_icc=observed_icc, items=items
    )
    lines = power.power_plan(
        baseline=baseline,
        shares=chosen,
        alpha=alpha,
        powers=powers,
        items_per_participant=items,
        design_effect=design_effect,
        judge_correlation=judge_correlation,
        judge_ratio=judge_ratio,
    )
    return StudyPower(
        study=study.slug,
        baseline=baseline,
        scale=list(scale.labels),
        alpha=alpha,
        comparisons=len(names) - 1,
        items_per_participant=items,
        design_effect=design_effect,
        icc=icc,
        design_effect_source=icc_source,
        shares=chosen,
        share_sources=sources,
        judge_correlation=judge_correlation,
        judge_ratio=judge_ratio,
        lines=lines,
    )
