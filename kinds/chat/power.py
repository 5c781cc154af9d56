"""The chat kind's power before launch (its `StudyKind.power_planner`, asked through analysis/study_power.py, and
its launch-page panel, `chat_launch_power_html`): conversations per source × label cell, and participants in all
(one conversation each), for the source effect and the source × label interaction on the PETS total at a stated
smallest effect (kinds/chat/power_math.py).

The stated effects and the spread are the researcher's, typed in the form every kind's panel shares
(analysis/power_form.py) in PETS points (0–100): the smallest source effect, the smallest interaction (the source
effect under one label differing by that much from under the reference label) and the standard deviation of a
conversation's PETS total. Until something is typed the plan runs on CHAT_SOURCE_EFFECT, CHAT_INTERACTION and
CHAT_SD, and the panel says they are assumptions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from analysis import power
from analysis.power_form import TYPED, power_form_inputs, typed_percentages
from analysis.study_power import StudyPower, StudyPowerError
from studies.models import Condition, Study

from .assignment import study_labels
from .power_math import design_power

CHAT_SOURCE_EFFECT = 10.0  # PETS points: a tenth of the scale between the sources
CHAT_INTERACTION = 10.0  # PETS points: the label changes the source effect by a tenth of the scale
CHAT_SD = 20.0  # PETS points: an assumed spread of one conversation's PETS total; give your pilot's
FIELDS = {
    "source": "smallest source effect",
    "interaction": "smallest interaction",
    "sd": "SD of the PETS total",
}
DEFAULTS = {"source": CHAT_SOURCE_EFFECT, "interaction": CHAT_INTERACTION, "sd": CHAT_SD}
EFFECT_FIELD = "effect-"


def chat_power_plan(
    *,
    study: Study,
    alpha: float | None = None,
    powers: Sequence[float] = power.DEFAULT_POWERS,
    shares: Mapping[str, Sequence[float]] | None = None,
    judge_correlation: float | None = None,
    judge_ratio: float | None = None,
    **_unused,
) -> StudyPower:
    """Conversations per cell and participants for the source effect and the interaction (module doc). `shares`,
    where given, holds the stated effects as fractions of the 0–100 scale: {"source": [0.1], "interaction": [0.1],
    "sd": [0.2]}; items per participant, design effects and ICCs do not apply (one conversation per participant)."""
    if judge_correlation is not None or judge_ratio is not None:
        raise StudyPowerError("the chat plan has no prediction-powered (judge) variant")
    sources = list(Condition.objects.filter(study=study).order_by("-is_baseline", "position", "name"))
    if len(sources) < 2:
        raise StudyPowerError("needs two sources (conditions) at least")
    labels = study_labels(study)
    given = dict(shares or {})
    unknown = sorted(set(given) - set(FIELDS))
    if unknown:
        raise StudyPowerError(f"effects given for {unknown}; the plan takes {', '.join(FIELDS)}")
    chosen = {name: [100 * given[name][0]] if name in given else [DEFAULTS[name]] for name in FIELDS}
    sources_of = {
        name: "given" if name in given else "assumed (no published PETS study to take it from)"
        for name in FIELDS
    }
    alpha = power.DEFAULT_ALPHA if alpha is None else alpha
    try:
        planned = design_power(
            sources=len(sources),
            labels=len(labels),
            source_effect=chosen["source"][0],
            interaction_effect=chosen["interaction"][0],
            sd=chosen["sd"][0],
            alpha=alpha,
            powers=tuple(powers),
        )
    except ValueError as exc:
        raise StudyPowerError(str(exc)) from None
    lines = [
        power.PowerLine(
            condition=p.test,
            test=f"{p.test} on the PETS total, OLS F test ({p.df_num} numerator df), {p.effect_points:g} points, SD {p.sd:g}",
            power=p.power,
            alpha_family=alpha,
            alpha_first_step=alpha,
            effect_size_w=p.cohens_f,  # Cohen's f of the pattern
            ratings_per_condition=p.per_cell,  # conversations a source × label cell
            ratings_uncorrected=p.per_cell,
            participants_per_condition=p.conversations,  # all cells: one conversation a participant
            ppi_ratings_per_condition=None,
            ppi_participants_per_condition=None,
        )
        for p in planned
    ]
    return StudyPower(
        study=study.slug,
        baseline=sources[0].name,
        scale=["PETS total, 0–100"],
        alpha=alpha,
        comparisons=1,
        items_per_participant=1,
        design_effect=1.0,
        icc=None,
        design_effect_source="one conversation per participant",
        shares={name: [value[0] / 100] for name, value in chosen.items()},
        share_sources=sources_of,
        judge_correlation=None,
        judge_ratio=None,
        lines=lines,
    )


def chat_launch_power_context(*, study: Study, query: Mapping[str, str] | None = None) -> dict:
    numbers, errors = typed_percentages(query or {}, EFFECT_FIELD)
    typed = {}
    for name, values in numbers.items():
        if name not in FIELDS:
            errors.append(f"{name}: not one of {', '.join(FIELDS)}")
        elif len(values) != 1 or not 0 < values[0] <= 100:
            errors.append(f"{FIELDS[name]}: type one number of PETS points above 0 and at most 100")
        elif abs(values[0] - DEFAULTS[name]) > 1e-9:
            typed[name] = [values[0] / 100]
    try:
        plan = chat_power_plan(study=study, shares=typed)
    except (StudyPowerError, power.PowerError) as exc:
        return {"error": str(exc), "study": study}
    for name in typed:
        plan.share_sources[name] = TYPED
    cells = len(study_labels(study)) * len(Condition.objects.filter(study=study))
    rows = [
        {
            "test": line.condition,
            "power": round(line.power * 100),
            "cohens_f": line.effect_size_w,
            "per_cell": line.ratings_per_condition,
            "people": line.participants_per_condition,
        }
        for line in plan.lines
    ]
    defaults = any(source != TYPED for source in plan.share_sources.values())
    help_text = (
        "Until you type your own, the plan assumes a source effect and an interaction of "
        f"{CHAT_SOURCE_EFFECT:g} PETS points each, with a standard deviation of {CHAT_SD:g} points. "
        if defaults
        else ""
    ) + "Type the smallest effects worth detecting and the spread you expect, in PETS points (0–100)."
    return {
        "plan": plan,
        "study": study,
        "cells": cells,
        "rows": rows,
        "inputs": [
            {**entry, "label": f"{FIELDS[entry['condition']]} (points)"}
            for entry in power_form_inputs(
                prefix=EFFECT_FIELD, values=plan.shares, sources=plan.share_sources, unit="points"
            )
        ],
        "typing_errors": errors,
        "typed": bool(typed),
        "form_help": help_text,
    }


def chat_launch_power_html(study: Study, query: Mapping[str, str] | None = None) -> SafeString:
    """The chat kind's `launch_panel`: its power before launch, on the effects typed in `query` where given."""
    return render_to_string(
        "analysis/_chat_launch_power.html", chat_launch_power_context(study=study, query=query)
    )
