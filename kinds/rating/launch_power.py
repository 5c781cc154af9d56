"""Power on the launch page: the participants per condition the planned tests need (analysis.study_power), the
shares assumed and where they came from, and, with a judge already measured against people, the human ratings
needed under PPI. The rating kind names `launch_power_html` as its launch panel (kinds/rating/kind.py), so the
studies admin shows it without importing analysis.

A judge counts as calibrated here when it rated at least `calibration.MIN_RESPONSES` responses that people rated
(in this study or, for a wave, in its family's root study); its per-value indicator correlations are measured on
those pairs (no bootstrap: the page stays quick). Whether it may screen is its report's verdict, linked.
For a wave, the baseline's expected shares are the family root's stored baseline as its people rated it (the wave
is analysed against it, analysis/waves.py). Judge ratings per human rating under PPI: (responses per condition − human ratings needed) / human ratings needed,
with the smallest condition's responses and the 90 % requirement: conservative (see analysis.judge_report).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString

from analysis import power, stats
from analysis.calibration import MIN_RESPONSES, indicator_correlations, pairs_frame
from analysis.judge_report import human_ratings_frame
from analysis.judge_screening import judge_per_response
from analysis.power import baseline_icc
from analysis.power_form import TYPED, power_form_inputs, typed_percentages
from analysis.study_power import StudyPower, StudyPowerError, study_power_plan
from generation.selectors import judge_ratings_frame, judges_of
from studies.models import Response, Study
from studies.waves import StudyCopyError, family_root, parent_baseline

from .power import MIN_OBSERVED_RATINGS


def calibrated_judge(*, study: Study) -> dict | None:
    """The judge (of this study or its family's root) with the most responses rated by people, if ≥ MIN_RESPONSES:
    name, study, responses, per-value correlations (by index into the scale)."""
    root = family_root(study)
    best = None
    for owner in [study] + ([root] if root.pk != study.pk else []):
        judges = judges_of(study=owner)
        if not judges:
            continue
        human = human_ratings_frame(study=owner)
        for judge in judges:
            single = judge_per_response(judge_ratings_frame(judge=judge))
            pairs = pairs_frame(human, single[single["response_id"].isin(human["response_id"])])
            responses = pairs["response_id"].nunique() if not pairs.empty else 0
            if responses < MIN_RESPONSES or (best and best["responses"] >= responses):
                continue
            values = sorted(int(o["value"]) for o in owner.scale)
            rho = indicator_correlations(pairs, values)
            best = {
                "name": judge.name,
                "model": judge.model,
                "study": owner.slug,
                "responses": responses,
                "correlations": {i: (r if np.isfinite(r) else 0.0) for i, r in enumerate(rho.values())},
                "url": reverse("analysis:judge_report", args=[owner.slug, judge.name]),
            }
    return best


def _judge_ratio(study: Study, plan: StudyPower) -> float:
    counts = (
        pd.Series(
            Response.objects.filter(condition__study=study, sample_index=0).values_list(
                "condition__name", flat=True
            )
        )
        .value_counts()
        .reindex([c for c in plan.shares if c != plan.baseline], fill_value=0)
    )
    needed = max((ln.ratings_per_condition or 0) for ln in plan.lines)
    if not needed or counts.empty:
        return 0.0
    return max(int(counts.min()) - needed, 0) / needed


def stored_baseline_shares(*, study: Study) -> tuple[list[float], str, float] | None:
    """For a wave: the family root's baseline, as its people rated it (counted ratings after its declared
    exclusion rules), whenever it has any: (shares, where they came from, the within-rater ICC of its top value,
    estimated only from at least MIN_OBSERVED_RATINGS ratings, NaN below). The wave is analysed against these
    ratings, so its plan starts from them, not from the published study's shares; few ratings are said to be
    few."""
    if study.parent_id is None:
        return None
    root = family_root(study)
    try:
        baseline = parent_baseline(root)
    except StudyCopyError:  # a root without a baseline: nothing stored to plan from
        return None
    human = human_ratings_frame(study=root)
    mine = human[human["condition"] == baseline.name]
    if mine.empty:
        return None
    scale = stats.Scale.from_study_scale(root.scale)
    counts = mine["value"].value_counts().reindex(list(scale.values), fill_value=0)
    few = len(mine) < MIN_OBSERVED_RATINGS
    source = f"stored baseline: {baseline.name} of {root.slug} ({len(mine)} ratings{'; few, so rough' if few else ''})"
    icc = float("nan") if few else baseline_icc(mine["value"], mine["rater"], scale.top)
    return (counts / counts.sum()).tolist(), source, icc


SHARES_FIELD = "shares-"  # the query's key of a condition's typed shares: shares-<condition name>


def typed_shares(query: Mapping[str, str]) -> tuple[dict[str, list[float]], list[str]]:
    """The expected shares the researcher typed ({condition: shares, in the scale's order}), read from the query's
    `shares-<condition>` fields as percentages ("20, 50, 30": analysis.power_form), and what is wrong with any of
    them (each named; such a condition keeps its default). Blank fields are left out."""
    numbers, errors = typed_percentages(query, SHARES_FIELD)
    typed: dict[str, list[float]] = {}
    for name, values in numbers.items():
        total = sum(values)
        if any(v < 0 for v in values) or abs(total - 100) > 1:
            text = ", ".join(f"{v:g}" for v in values)
            errors.append(
                f"{name}: the shares must be percentages summing to 100, got {text} (sum {total:g})"
            )
            continue
        typed[name] = [v / total for v in values]
    return typed, errors


def _form_help(plan: StudyPower, defaults_published: bool) -> str:
    published = (
        "Until you type your own, the shares are the published study's (its people's ratings for the baseline, "
        "GPT-4's for every other condition): an effect as large as it found. "
        if defaults_published
        else ""
    )
    return (
        f"{published}Type the shares you expect, in percent of {', '.join(plan.scale)}, or the smallest difference "
        "worth detecting: the figures above are recomputed on them."
    )


def launch_power_context(
    *, study: Study, query: Mapping[str, str] | None = None, extras: bool = True
) -> dict:
    """The panel's context: the plan on the shares typed in `query` (`typed_shares`) where given, else the
    defaults (a wave's stored baseline, the published study's shares, as `study_power_plan` chooses and says);
    `extras`: a wave's stored baseline and the calibrated judge (PPI)."""
    typed, typing_errors = typed_shares(query or {})
    stored = stored_baseline_shares(study=study) if extras else None
    icc = {}
    if stored and np.isfinite(stored[2]):
        icc = {"icc": stored[2], "icc_source": f"estimated from the {stored[1]}"}
    try:
        plan = study_power_plan(study=study, **icc)
        stored_shares = {plan.baseline: stored[0]} if stored else {}
        if stored_shares:
            plan = study_power_plan(study=study, shares=stored_shares, **icc)
    except (StudyPowerError, power.PowerError) as exc:
        return {"error": str(exc), "study": study}
    typing_errors += [
        f"{name}: not a condition of this plan" for name in sorted(set(typed) - set(plan.shares))
    ]
    # A field sent back as it was filled (the default, to the rounding of its percentages) is no assumption typed.
    typed = {
        name: values
        for name, values in typed.items()
        if name in plan.shares
        and not np.allclose(values, plan.shares[name], atol=0.0006)  # 0.05 % at most: the field's rounding
    }
    given = {**stored_shares, **typed} or None
    if typed:
        try:
            plan = study_power_plan(study=study, shares=given, **icc)
        except (StudyPowerError, power.PowerError) as exc:
            # Refused (e.g. three numbers on a five-point scale): say so, and keep the plan on the defaults.
            typing_errors.append(str(exc))
            typed, given = {}, stored_shares or None
    judge = calibrated_judge(study=study) if extras else None
    ratio = None
    if judge is not None:
        ratio = _judge_ratio(study, plan)
        plan = study_power_plan(
            study=study, shares=given, judge_correlation=judge["correlations"], judge_ratio=ratio, **icc
        )
        judge["ratio"] = ratio
        judge["top_correlation"] = judge["correlations"][len(plan.scale) - 1]
    if stored and plan.baseline not in typed:
        plan.share_sources[plan.baseline] = stored[1]
    for name in typed:
        plan.share_sources[name] = TYPED
    rows: dict[tuple[str, str], dict] = {}
    for line in plan.lines:
        row = rows.setdefault(
            (line.condition, line.test), {"condition": line.condition, "test": _short(line.test)}
        )
        key = f"{round(line.power * 100)}"
        row[f"people_{key}"] = line.participants_per_condition
        row[f"ppi_{key}"] = line.ppi_participants_per_condition
        row[f"ratings_{key}"] = line.ratings_per_condition
        row[f"ppi_ratings_{key}"] = line.ppi_ratings_per_condition
    shares = [
        {
            "condition": name,
            "shares": ", ".join(
                f"{label} {100 * s:.1f} %" for label, s in zip(plan.scale, values, strict=True)
            ),
            "source": plan.share_sources[name],
        }
        for name, values in plan.shares.items()
    ]
    return {
        "plan": plan,
        "quota_notes": quota_notes(study=study, plan=plan),
        "first_step": plan.alpha / max(plan.comparisons, 1),
        "rows": list(rows.values()),
        "shares": shares,
        "judge": judge,
        "study": study,
        "min_responses": MIN_RESPONSES,
        "inputs": power_form_inputs(prefix=SHARES_FIELD, values=plan.shares, sources=plan.share_sources),
        "typing_errors": typing_errors,
        "typed": bool(typed),
        "extras": extras,
        "form_help": _form_help(
            plan, any(source.startswith("seed study") for source in plan.share_sources.values())
        ),
    }


def quota_notes(*, study: Study, plan: StudyPower) -> list[dict]:
    """How each compared condition's quota stands against the participants its planned tests need: a comparison
    has as many participants per condition as the smaller of its two quotas. One note per non-baseline
    condition: {condition, quota, needed (by power, the most any planned test needs), enough (the highest
    power the quota reaches, or None), text}."""
    quotas = {c.name: c.effective_quota for c in study.conditions.all()}
    needed: dict[str, dict[float, float]] = {}
    for line in plan.lines:
        per = needed.setdefault(line.condition, {})
        n = line.participants_per_condition if line.participants_per_condition is not None else math.inf
        per[line.power] = max(per.get(line.power, 0), n)
    notes = []
    for name, by_power in needed.items():
        quota = min(quotas.get(name, 0), quotas.get(plan.baseline, 0))
        reached = [p for p, n in sorted(by_power.items()) if quota >= n]
        lowest = min(by_power)
        words = ", ".join(
            f"{'∞' if math.isinf(n) else int(n)} for {round(p * 100)} %" for p, n in sorted(by_power.items())
        )
        if reached:
            text = f"{name}: the quota of {quota} per condition reaches {round(reached[-1] * 100)} % power (needs {words})."
        else:
            text = (
                f"{name}: the quota of {quota} per condition is below the {words} participants the planned tests "
                "need: the study would likely miss an effect of the assumed size. Raise the quota, or plan it as "
                "a pilot."
            )
        notes.append({"condition": name, "quota": quota, "needed": by_power[lowest], "enough": bool(reached),
                      "text": text})  # fmt: skip
    return notes


def _short(test: str) -> str:
    return {power.TEST_2X3: "2×3 χ²", power.TEST_2X2_YATES: "2×2 top vs rest (Yates)"}.get(test, test)


def launch_power_html(study: Study, query: Mapping[str, str] | None = None) -> SafeString:
    """The launch page's and the quotas step's power panel (the rating kind's `launch_panel`), on the shares
    typed in `query` where given."""
    return render_to_string("analysis/_launch_power.html", launch_power_context(study=study, query=query))
