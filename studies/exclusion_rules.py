"""The exclusion rules a rating study declares before launch: plain JSON (`Study.exclusion_rules`), so the
declaration can be shown, compared and frozen with the rest of the design.

Structure (every key present; `null` turns a parametrised rule off)::

    {
      "attention_checks": true,        # drop participants flagged for failed attention checks
      "incomplete": true,              # drop participants who did not complete (returned, timed out, abandoned)
      "too_fast": null,                # or {"min_median_ms": 1500}: median response time below this
      "straight_lining": null,         # or {"min_items": 10, "corroborating_median_ms": 3000,
                                       #     "identical_alone": false}
      "authenticity": false            # drop participants the authenticity score flags (studies/authenticity.py),
                                       # unless cleared in review; and those confirmed in review
    }

Straight-lining on a short scale: on a three-point scale where most responses are good, ten identical answers are
often sincere. So by default the same value for every item only counts as careless when something else corroborates
it: the participant contradicted an attention item (answered at least one check wrongly, even within the allowance)
or answered fast (median response time below `corroborating_median_ms`). Identical values alone
(`identical_alone: true`) may only be declared on scales of five points or more.

This module only describes and validates the declaration; `analysis.exclusions` applies it.
"""

from __future__ import annotations

import copy
from typing import Any

from django.core.exceptions import ValidationError

RULE_KEYS = ("attention_checks", "incomplete", "too_fast", "straight_lining", "authenticity")
MIN_SCALE_POINTS_FOR_IDENTICAL_ALONE = 5

# What a rule gets when the admin switches it on without giving thresholds (also the command line's defaults).
TOO_FAST_DEFAULTS = {"min_median_ms": 1500}
STRAIGHT_LINING_DEFAULTS = {"min_items": 10, "corroborating_median_ms": 3000, "identical_alone": False}


def default_exclusion_rules() -> dict[str, Any]:
    """A new study's declaration: attention checks and incomplete participation only."""
    return {
        "attention_checks": True,
        "incomplete": True,
        "too_fast": None,
        "straight_lining": None,
        "authenticity": False,
    }


def seed_study_exclusion_rules() -> dict[str, Any]:
    """What the seed study (Welivita & Pu, 2024) declared: attention checks only."""
    return {
        "attention_checks": True,
        "incomplete": False,
        "too_fast": None,
        "straight_lining": None,
        "authenticity": False,
    }


def _positive_number(value: Any, where: str, problems: list[str], *, integer: bool = False) -> None:
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok_type or value <= 0:
        kind = "a whole number" if integer else "a number"
        problems.append(f"{where} must be {kind} above 0 (got {value!r})")


def exclusion_rules_normalise(value: Any, *, scale_points: int | None = None) -> dict[str, Any]:
    """The declaration with every key present and defaults filled in, or ValidationError listing every problem.

    `scale_points` (the number of values on the study's scale), when given, refuses straight-lining by identical
    values alone on scales shorter than five points."""
    if not isinstance(value, dict):
        raise ValidationError(f"Exclusion rules must be a JSON object, e.g. {default_exclusion_rules()}.")
    problems: list[str] = []
    unknown = sorted(set(value) - set(RULE_KEYS))
    if unknown:
        problems.append(f"unknown rule(s) {unknown}; the rules are {list(RULE_KEYS)}")
    out: dict[str, Any] = default_exclusion_rules()
    for key in ("attention_checks", "incomplete", "authenticity"):
        if key in value:
            if not isinstance(value[key], bool):
                problems.append(f"{key} must be true or false (got {value[key]!r})")
            else:
                out[key] = value[key]
    too_fast = value.get("too_fast")
    if too_fast is not None:
        if not isinstance(too_fast, dict) or set(too_fast) - set(TOO_FAST_DEFAULTS):
            problems.append('too_fast must be null or {"min_median_ms": <ms>}')
        else:
            too_fast = {**TOO_FAST_DEFAULTS, **too_fast}
            _positive_number(too_fast["min_median_ms"], "too_fast.min_median_ms", problems)
            out["too_fast"] = too_fast
    straight = value.get("straight_lining")
    if straight is not None:
        if not isinstance(straight, dict) or set(straight) - set(STRAIGHT_LINING_DEFAULTS):
            problems.append(
                "straight_lining must be null or an object with min_items, corroborating_median_ms "
                "and identical_alone"
            )
        else:
            straight = {**STRAIGHT_LINING_DEFAULTS, **straight}
            _positive_number(straight["min_items"], "straight_lining.min_items", problems, integer=True)
            _positive_number(
                straight["corroborating_median_ms"], "straight_lining.corroborating_median_ms", problems
            )
            if not isinstance(straight["identical_alone"], bool):
                problems.append("straight_lining.identical_alone must be true or false")
            elif (
                straight["identical_alone"]
                and scale_points is not None
                and scale_points < MIN_SCALE_POINTS_FOR_IDENTICAL_ALONE
            ):
                problems.append(
                    f"straight_lining.identical_alone needs a scale of at least "
                    f"{MIN_SCALE_POINTS_FOR_IDENTICAL_ALONE} points (this one has {scale_points}): on a short "
                    "scale identical answers are often sincere; keep identical_alone false so a wrong attention "
                    "check or a fast median time must corroborate them"
                )
            out["straight_lining"] = straight
    if problems:
        raise ValidationError(problems)
    return copy.deepcopy(out)


#: Each rule's name in words, in RULE_KEYS order.
RULE_TITLES = {
    "attention_checks": "Attention checks",
    "incomplete": "Incomplete participation",
    "too_fast": "Too fast",
    "straight_lining": "Straight-lining",
    "authenticity": "Authenticity",
}


def exclusion_rules_words(declared: dict) -> dict[str, str]:
    """Rule → what it excludes, in words ("off" for a rule not declared): the one wording of the rules, for the
    pre-registration, the analysis and the report."""
    rules = exclusion_rules_normalise(declared)
    too_fast, straight = rules["too_fast"], rules["straight_lining"]
    straight_words = "off"
    if straight is not None:
        straight_words = f"the same value for all of at least {straight['min_items']} items"
        if not straight["identical_alone"]:
            straight_words += (
                ", with at least one wrong attention-check answer or a median response time below "
                f"{float(straight['corroborating_median_ms']):g} ms"
            )
    return {
        "attention_checks": "participants flagged for failed attention checks"
        if rules["attention_checks"]
        else "off",
        "incomplete": "participants who did not complete (returned, timed out, or never finished)"
        if rules["incomplete"]
        else "off",
        "too_fast": f"median response time below {float(too_fast['min_median_ms']):g} ms"
        if too_fast is not None
        else "off",
        "straight_lining": straight_words,
        "authenticity": "participants the authenticity score flags (not cleared in review) or confirmed in review"
        if rules["authenticity"]
        else "off",
    }
