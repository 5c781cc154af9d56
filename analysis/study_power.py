"""Power before launch for a stored study, by its kind's planner (`StudyKind.power_planner`); the rating kind's,
`rating_power_plan`, takes its conditions, items per participant and expected shares, fed to
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

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import pandas as pd
from django.utils.module_loading import import_string

from analysis import exclusions, power, selectors, stats
from analysis.bradley_terry import BradleyTerryError, win_rate_votes_needed
from analysis.clustered import design_effect as design_effect_of
from analysis.power import baseline_icc
from analysis.services import AnalysisError, baseline_choose, study_alpha
from studies.kinds import kind_of
from studies.models import Study

MIN_OBSERVED_RATINGS = 30


class StudyPowerError(ValueError):
    """The study cannot be planned as asked."""


@dataclass
class StudyPower:
    study: str
    baseline: str
    scale: list[str]
    alpha: float
    comparisons: int
    items_per_participant: int
    design_effect: float
    icc: float | None
    design_effect_source: str
    shares: dict[str, list[float]]
    share_sources: dict[str, str]
    judge_correlation: float | None
    judge_ratio: float | None
    lines: list[power.PowerLine] = field(default_factory=list)

    @property
    def design_effect_text(self) -> str:
        """What the command and the launch page say about the design effect they applied."""
        why = (
            self.design_effect_source
            if self.icc is None
            else f"ICC {self.icc:.3f}, {self.design_effect_source}"
        )
        return f"design effect {self.design_effect:.2f} ({why})"

    def as_dict(self) -> dict:
        out = asdict(self)
        out["design_effect_text"] = self.design_effect_text
        out["lines"] = power.plan_as_dicts(self.lines)
        return out


def _counted_ratings(study: Study) -> pd.DataFrame:
    """The study's counted ratings after its declared exclusion rules, as its analysis will apply them."""
    rows = selectors.rating_rows_frame(study=study)
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


def study_power_plan(*, study: Study, **options) -> StudyPower:
    """The power plan of `study` by its kind's planner (`StudyKind.power_planner`, e.g. `rating_power_plan`),
    with the planner's options; StudyPowerError for a kind that plans no power."""
    path = kind_of(study).power_planner
    if path is None:
        raise StudyPowerError(f"study {study.slug!r} is a {study.kind} study: its kind plans no power")
    return import_string(path)(study=study, **options)


def design_effect_choose(
    *, design_effect: float | None, icc: float | None, icc_source: str, observed_icc: float, items: int
) -> tuple[float, float | None, str]:
    """(design effect, ICC, source) by the rules in the module doc. Items below 1 are left for
    power.power_plan to refuse."""
    if design_effect is not None or items < 1:
        return (design_effect or 1.0), None, "given"
    if icc is not None:
        return design_effect_of(icc, items), icc, icc_source
    if math.isfinite(observed_icc):
        return design_effect_of(observed_icc, items), observed_icc, "estimated from the baseline's ratings"
    name = max(power.SEED_ICC, key=power.SEED_ICC.get)
    seed_icc = power.SEED_ICC[name]
    return design_effect_of(seed_icc, items), seed_icc, f"seed study's largest within-rater ICC ({name})"


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
    infos = selectors.condition_list(study=study)
    try:
        baseline = baseline_choose(conditions=infos, requested=None)
    except AnalysisError as exc:  # no conditions
        raise StudyPowerError(str(exc)) from None
    names = [c.name for c in infos]
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


# --- the pairwise preference kind's planner --------------------------------------------------------------------------

PAIRWISE_SCALE = ("baseline preferred", "about the same", "condition preferred")
PAIRWISE_TEST = "win rate vs 50 % (non-tied votes against the baseline)"
PAIRWISE_WIN_RATE = 0.55  # a condition preferred in 55 % of its non-tied votes against the baseline
PAIRWISE_TIE_RATE = 0.25  # "about the same" in a quarter of the answers: an assumption, give observed shares


def pairwise_power_plan(
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
    """Pairs and participants a pairwise preference study needs to tell each condition's win rate against the
    baseline from 50 %, the plan in the rating planner's shape (read by `study_power` and the launch page).

    Per non-baseline condition, the expected shares of its answers against the baseline, (baseline preferred,
    about the same, condition preferred): `shares` by condition, else `alternative_shares`, else a win rate of
    PAIRWISE_WIN_RATE among PAIRWISE_TIE_RATE ties. Non-tied votes: `bradley_terry.win_rate_votes_needed` at the
    first Holm step α/(conditions − 1); pairs (ratings_per_condition) = votes / (1 − tie share) × the design
    effect; participants = pairs × (condition pairs) / items per participant, since the balanced design spreads a
    participant's items over every pair of conditions. The design effect 1 + (m − 1)·ICC (analysis.clustered) is
    for the m = items / (condition pairs) votes a participant gives on one comparison, the ICC chosen as for the
    rating kind (given, else the seed study's largest: no pairwise ICC is published). Reads only what every study
    has: its conditions and items per participant. No PPI plan yet: a judge's correlation is refused."""
    if judge_correlation is not None or judge_ratio is not None:
        raise StudyPowerError("the pairwise plan has no prediction-powered (judge) variant")
    infos = selectors.condition_list(study=study)
    try:
        baseline = baseline_choose(conditions=infos, requested=None)
    except AnalysisError as exc:
        raise StudyPowerError(str(exc)) from None
    names = [c.name for c in infos]
    others = [n for n in names if n != baseline]
    if not others:
        raise StudyPowerError("needs at least one condition besides the baseline")
    explicit = dict(shares or {})
    unknown = sorted(set(explicit) - set(others))
    if unknown:
        raise StudyPowerError(f"shares given for {unknown}, which are not non-baseline conditions ({others})")
    default = [
        (1 - PAIRWISE_TIE_RATE) * (1 - PAIRWISE_WIN_RATE),
        PAIRWISE_TIE_RATE,
        (1 - PAIRWISE_TIE_RATE) * PAIRWISE_WIN_RATE,
    ]
    chosen, sources = {}, {}
    for name in others:
        if name in explicit:
            chosen[name], sources[name] = explicit[name], "given"
        elif alternative_shares is not None:
            chosen[name], sources[name] = alternative_shares, "given (all conditions)"
        else:
            chosen[name] = default
            sources[name] = (
                f"assumed: win rate {PAIRWISE_WIN_RATE:.0%} of non-tied votes, {PAIRWISE_TIE_RATE:.0%} ties"
            )
        checked = power.shares_check(chosen[name], name=f"shares of {name}")
        if checked.size != len(PAIRWISE_SCALE):
            raise StudyPowerError(f"shares of {name} must be three: {', '.join(PAIRWISE_SCALE)}")
        if checked[1] >= 1:
            raise StudyPowerError(f"shares of {name}: every answer a tie leaves no vote to test")
        chosen[name] = checked.tolist()
    items = study.items_per_participant if items_per_participant is None else items_per_participant
    if items < 1:
        raise StudyPowerError(f"items per participant must be at least 1, got {items}")
    alpha = power.DEFAULT_ALPHA if alpha is None else alpha
    pair_kinds = len(names) * (len(names) - 1) // 2
    per_comparison = max(items / pair_kinds, 1.0)
    design_effect, icc, icc_source = design_effect_choose(
        design_effect=design_effect,
        icc=icc,
        icc_source=icc_source,
        observed_icc=math.nan,
        items=per_comparison,
    )
    if design_effect < 1:
        raise StudyPowerError(f"the design effect is at least 1, got {design_effect}")
    first_step = alpha / len(others)
    lines = []
    for name in others:
        lose, tie, win = chosen[name]
        rate = win / (win + lose)
        for target in powers:
            try:
                votes = win_rate_votes_needed(rate, alpha=first_step, power=target)
            except BradleyTerryError as exc:
                raise StudyPowerError(str(exc)) from None
            pairs = votes / (1 - tie) * design_effect
            lines.append(
                power.PowerLine(
                    condition=name,
                    test=PAIRWISE_TEST,
                    power=target,
                    alpha_family=alpha,
                    alpha_first_step=first_step,
                    effect_size_w=2 * abs(rate - 0.5),  # Cohen's w of wins vs losses against 50/50
                    ratings_per_condition=power._ceil(pairs),
                    ratings_uncorrected=power._ceil(votes * design_effect),  # non-tied votes
                    participants_per_condition=power._ceil(pairs * pair_kinds / items),
                    ppi_ratings_per_condition=None,
                    ppi_participants_per_condition=None,
                )
            )
    return StudyPower(
        study=study.slug,
        baseline=baseline,
        scale=list(PAIRWISE_SCALE),
        alpha=alpha,
        comparisons=len(others),
        items_per_participant=items,
        design_effect=design_effect,
        icc=icc,
        design_effect_source=icc_source,
        shares=chosen,
        share_sources=sources,
        judge_correlation=None,
        judge_ratio=None,
        lines=lines,
    )
