"""Power before launch for a stored study, by its kind's planner (`StudyKind.power_planner`: the rating kind's in
kinds/rating/power.py, the pairwise kind's in kinds/pairwise/power.py); what the planners share: the plan's shape
(`StudyPower`) and the choice of the design effect (`design_effect_choose`). Only reads.

Design effect (participants give several answers, analysis.clustered), applied by default, first that applies:
* `design_effect` given (the `--design-effect` flag): as given;
* `icc` given (`--icc`, or the launch page's stored baseline for a wave): 1 + (items − 1)·ICC;
* an ICC observed on the study's own answers, when its planner estimates one;
* otherwise the seed study's largest within-rater ICC (`power.SEED_ICC`, 0.116 for chatgpt): conservative, since
  people rating LLM responses agreed with themselves more than those rating people's.
The plan says which (`design_effect_source`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from analysis import power, selectors
from analysis.clustered import design_effect as design_effect_of
from analysis.services import AnalysisError, baseline_choose
from studies.kinds import kind_of, resolved
from studies.models import Study


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


def study_power_plan(*, study: Study, **options) -> StudyPower:
    """The power plan of `study` by its kind's planner (`StudyKind.power_planner`, e.g. `rating_power_plan`),
    with the planner's options; StudyPowerError for a kind that plans no power."""
    path = kind_of(study).power_planner
    if path is None:
        raise StudyPowerError(f"study {study.slug!r} is a {study.kind} study: its kind plans no power")
    return resolved(path)(study=study, **options)


def planned_conditions(study: Study) -> tuple[list[str], str]:
    """The names of the study's conditions and its baseline's, for a kind's planner; StudyPowerError for a study
    without conditions."""
    infos = selectors.condition_list(study=study)
    try:
        baseline = baseline_choose(conditions=infos, requested=None)
    except AnalysisError as exc:
        raise StudyPowerError(str(exc)) from None
    return [c.name for c in infos], baseline


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
