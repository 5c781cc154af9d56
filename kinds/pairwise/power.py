"""The pairwise kind's power before launch (its `StudyKind.power_planner`, asked through analysis/study_power.py):
votes and participants to tell each condition's win rate against the baseline from 50 %."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from analysis import power
from analysis.study_power import StudyPower, StudyPowerError, design_effect_choose, planned_conditions
from studies.models import Study

from .bradley_terry import BradleyTerryError, win_rate_votes_needed

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
    names, baseline = planned_conditions(study)
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
