"""The analysis a study plans before launch (`Study.planned_analysis`): plain JSON, frozen with the rest of the
design (studies/design.py), so what the analysis applies is what was registered.

Structure::

    {
      "tests": ["a test the researcher adds", ...],                # further tests, in words (the kind declares
                                                                     # its primary and secondary tests itself)
      "alpha": 0.05,                                                 # the significance level, 0 < α < 1
      "correction": "holm"                                           # the multiple-comparison correction within a
    }                                                                # family of tests: one of CORRECTIONS

The analysis (analysis/services.py) reads it through `studies.selectors.study_planned_analysis`: from the frozen
design once the study is launched (amendments included), from the study as it stands while it is a draft.
This module only describes and validates the declaration.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

# The corrections the analysis applies (statsmodels `multipletests` method names; "none": raw p-values).
CORRECTIONS = {
    "holm": "Holm",
    "bonferroni": "Bonferroni",
    "fdr_bh": "Benjamini–Hochberg (FDR)",
    "none": "none",
}
DEFAULT_ALPHA = 0.05
DEFAULT_CORRECTION = "holm"
KEYS = ("tests", "alpha", "correction")


def planned_analysis_normalise(value: Any) -> dict:
    """The declaration with every key present (missing ones get the defaults), or ValidationError naming what is
    wrong. Keys other than KEYS are kept as written (notes for the pre-registration)."""
    if value in (None, "", {}):
        value = {}
    if not isinstance(value, dict):
        raise ValidationError('the planned analysis is a JSON object: {"tests": [...], "alpha": 0.05, ...}')
    out = dict(value)
    tests = out.get("tests", [])
    if not isinstance(tests, list) or not all(isinstance(t, str) and t.strip() for t in tests):
        raise ValidationError("planned analysis: 'tests' is a list of test descriptions (text)")
    alpha = out.get("alpha", DEFAULT_ALPHA)
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < float(alpha) < 1:
        raise ValidationError(f"planned analysis: 'alpha' is a number between 0 and 1 (got {alpha!r})")
    correction = out.get("correction", DEFAULT_CORRECTION)
    if correction not in CORRECTIONS:
        raise ValidationError(
            f"planned analysis: unknown correction {correction!r}; choose one of {', '.join(CORRECTIONS)}"
        )
    out.update(tests=tests, alpha=float(alpha), correction=correction)
    return out


def correction_name(correction: str) -> str:
    """The correction in words (reports)."""
    return CORRECTIONS.get(correction, correction)


def default_scale() -> list[dict]:
    """The seed study's scale: Good / Okay / Bad, stored as 3 / 2 / 1, shown best first."""
    return [{"value": 3, "label": "Good"}, {"value": 2, "label": "Okay"}, {"value": 1, "label": "Bad"}]


# What every study was created with before each kind declared its own tests (StudyKind.analysis_plan): the
# rating kind's secondary tests, stored in a study's `tests` although nobody wrote them. Read as "no further tests".
FORMER_DEFAULT_TESTS = [
    "omnibus chi-square (condition x rating)",
    "chi-square vs baseline (2 x scale)",
    "chi-square vs baseline (2 x 2 top vs rest, Yates)",
    "bootstrap CI of the top-share change (participants resampled)",
]


def default_planned_analysis() -> dict:
    """A new study's declaration: no further tests (its kind declares the ones its analysis runs), α, correction."""
    return {"tests": [], "alpha": DEFAULT_ALPHA, "correction": DEFAULT_CORRECTION}


def further_tests(planned: dict) -> list[str]:
    """The tests the researcher added to the kind's own (the former default list counts as none)."""
    tests = list(planned.get("tests") or [])
    return [] if tests == FORMER_DEFAULT_TESTS else tests
