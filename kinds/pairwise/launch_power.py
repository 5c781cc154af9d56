"""Power on the pairwise kind's launch page and quotas step (its `launch_panel`): for each condition compared
with the baseline, the non-tied votes, pairs and participants needed to tell its win rate from 50 %
(`pairwise_power_plan`), on the researcher's own assumptions typed in the form every kind's panel shares
(analysis.power_form): per condition, the smallest win rate against the baseline worth detecting and the expected
tie rate, in percent ("55, 25"; the tie rate may be left out, keeping the default). Until something is typed the
plan runs on the planner's defaults (PAIRWISE_WIN_RATE, PAIRWISE_TIE_RATE: no pairwise study is published to take
them from), and the panel says so."""

from __future__ import annotations

from collections.abc import Mapping

from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from analysis import power
from analysis.power_form import TYPED, power_form_inputs, typed_percentages
from analysis.study_power import StudyPower, StudyPowerError, study_power_plan
from studies.models import Study

from .power import PAIRWISE_TIE_RATE, PAIRWISE_WIN_RATE

EFFECT_FIELD = (
    "effect-"  # the query's key of a condition's typed win rate and tie rate: effect-<condition name>
)


def shares_of(win_rate: float, tie_rate: float) -> list[float]:
    """The plan's shares (baseline preferred, about the same, condition preferred) of a win rate among the
    non-tied votes and a tie rate among all answers."""
    return [(1 - tie_rate) * (1 - win_rate), tie_rate, (1 - tie_rate) * win_rate]


def rates_of(shares: list[float]) -> list[float]:
    """(win rate among non-tied votes, tie rate): what the form shows for the plan's shares."""
    lose, tie, win = shares
    return [win / (win + lose), tie]


def typed_effects(query: Mapping[str, str]) -> tuple[dict[str, list[float]], list[str]]:
    """The shares the researcher's typed win and tie rates give ({condition: shares}), and what is wrong with any
    field (named; that condition keeps its default)."""
    numbers, errors = typed_percentages(query, EFFECT_FIELD)
    typed = {}
    for name, values in numbers.items():
        if len(values) > 2:
            errors.append(f"{name}: type the smallest win rate worth detecting and, optionally, the tie rate")
            continue
        win = values[0] / 100
        tie = values[1] / 100 if len(values) == 2 else PAIRWISE_TIE_RATE
        if not 0 < win < 1 or abs(win - 0.5) < 1e-9:
            errors.append(
                f"{name}: the win rate must lie between 0 and 100 % and differ from 50 %, got {values[0]:g}"
            )
            continue
        if not 0 <= tie < 1:
            errors.append(f"{name}: the tie rate must be at least 0 and below 100 %, got {values[1]:g}")
            continue
        typed[name] = shares_of(win, tie)
    return typed, errors


def pairwise_launch_power_context(*, study: Study, query: Mapping[str, str] | None = None) -> dict:
    typed, errors = typed_effects(query or {})
    try:
        plan: StudyPower = study_power_plan(study=study)
    except (StudyPowerError, power.PowerError) as exc:
        return {"error": str(exc), "study": study}
    errors += [
        f"{name}: not a condition compared with the baseline"
        for name in sorted(set(typed) - set(plan.shares))
    ]
    # A field sent back as it was filled (to the rounding of its percentages) is no assumption typed.
    typed = {
        name: shares
        for name, shares in typed.items()
        if name in plan.shares
        and max(abs(a - b) for a, b in zip(rates_of(shares), rates_of(plan.shares[name]), strict=True))
        > 0.0006
    }
    if typed:
        plan = study_power_plan(study=study, shares=typed)
        for name in typed:
            plan.share_sources[name] = TYPED
    rows = []
    for line in plan.lines:
        win, tie = rates_of(plan.shares[line.condition])
        rows.append(
            {
                "condition": line.condition,
                "win": 100 * win,
                "tie": 100 * tie,
                "power": round(line.power * 100),
                "votes": line.ratings_uncorrected,
                "pairs": line.ratings_per_condition,
                "people": line.participants_per_condition,
            }
        )
    defaults = any(source != TYPED for source in plan.share_sources.values())
    help_text = (
        (
            f"Until you type your own, every condition is assumed to win {PAIRWISE_WIN_RATE:.0%} of its non-tied "
            f"votes against the baseline with {PAIRWISE_TIE_RATE:.0%} ties (no pairwise study is published to take "
            "them from). "
            if defaults
            else ""
        )
        + "Type, per condition, the smallest win rate against the baseline worth detecting and the tie rate you "
        "expect, in percent (e.g. 55, 25): the figures above are recomputed on them."
    )
    return {
        "plan": plan,
        "study": study,
        "first_step": plan.alpha / max(plan.comparisons, 1),
        "rows": rows,
        "inputs": power_form_inputs(
            prefix=EFFECT_FIELD,
            values={name: rates_of(shares) for name, shares in plan.shares.items()},
            sources=plan.share_sources,
            unit="win rate, ties (%)",
        ),
        "typing_errors": errors,
        "typed": bool(typed),
        "form_help": help_text,
    }


def pairwise_launch_power_html(study: Study, query: Mapping[str, str] | None = None) -> SafeString:
    """The pairwise kind's `launch_panel`: its power before launch, on the rates typed in `query` where given."""
    return render_to_string(
        "analysis/_pairwise_launch_power.html", pairwise_launch_power_context(study=study, query=query)
    )
