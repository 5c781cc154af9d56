"""The analysis of a study: one entry point per study kind (named by the kind, see kinds/rating/entry.py), and
what every kind's analysis shares (its options, the baseline, the planned analysis and alpha, the cache).

`study_analyze` is what the dashboard, the `analyze` command, the report and the API all call, so they never
disagree. It only reads (through `analysis.selectors`).
"""

from __future__ import annotations

import hashlib
import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.core.cache import cache
from django.core.exceptions import ValidationError

from analysis import exclusions, selectors
from studies.kinds import kind_of, resolved
from studies.models import Study
from studies.selectors import study_planned_analysis

logger = logging.getLogger(__name__)

DEFAULT_BOOTSTRAP_SAMPLES = 2000


class AnalysisError(Exception):
    """The study cannot be analysed as asked (unknown baseline, unsupported kind...)."""


@dataclass
class AnalysisOptions:
    rules: exclusions.ExclusionRules | None = None  # None: the rules the study declared

    baseline: str | None = None
    bootstrap_samples: int = DEFAULT_BOOTSTRAP_SAMPLES
    seed: int | None = None  # None: the study's seed
    ordinal_with_emotion: bool = True


def jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        value = float(value)
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def baseline_choose(*, conditions: list[selectors.ConditionInfo], requested: str | None) -> str:
    """The requested baseline, else the condition marked is_baseline, else `human`, else the first condition."""
    names = [c.name for c in conditions]
    if requested:
        if requested not in names:
            raise AnalysisError(
                f"baseline {requested!r} is not a condition of this study (conditions: {names})"
            )
        return requested
    for c in conditions:
        if c.is_baseline:
            return c.name
    if "human" in names:
        return "human"
    if not names:
        raise AnalysisError("the study has no conditions")
    return names[0]


def analysis_entry(*, study: Study):
    """The analysis entry point of the study's kind (`StudyKind.analysis`, see kinds/rating/entry.py)."""
    path = kind_of(study).analysis
    if path is None:
        raise AnalysisError(f"no analysis for studies of kind {study.kind!r} yet")
    return resolved(path)


def study_analyze(*, study: Study, options: AnalysisOptions | None = None) -> Any:
    """Analyse a study of any kind, through its kind's analysis entry point."""
    return analysis_entry(study=study).analyze(study, options or AnalysisOptions())


CACHE_SECONDS = 600


RATING_ALPHA = 0.05  # the seed study's, and the default of a planned analysis


def study_planned(*, study: Study) -> dict:
    """The study's planned analysis (tests, alpha, correction; studies/planned_analysis.py) from its frozen design,
    or as it stands for a draft, with `design_sha256` naming the design it comes from."""
    try:
        return study_planned_analysis(study=study)
    except ValidationError as exc:
        raise AnalysisError(f"the study's planned analysis is invalid: {'; '.join(exc.messages)}") from None


def study_alpha(*, study: Study, planned: dict | None = None) -> float:
    """The study's significance level (the tests' `significant` column, the differential-exclusion warnings, the
    sensitivity line and the drift test use it): the kind's own setting where its settings have one (the
    questionnaire kind's), else the planned analysis' alpha."""
    own = kind_of(study).settings(study)
    if hasattr(own, "significance_level"):
        return float(own.significance_level)
    return float((planned if planned is not None else study_planned(study=study))["alpha"])


def study_data_fingerprint(*, study: Study) -> str:
    """Changes whenever anything the analysis reads changes: the kind's counted answers (`StudyKind.answers_stamp`),
    participants' exclusion flags, conditions, emotions' valence groups, the study's scale. A few small aggregate
    queries."""
    from django.db.models import Count, Max, Q, Sum

    from studies.models import Condition, Emotion, Participant

    stamp = kind_of(study).answers_stamp
    answers = resolved(stamp)(study=study) if stamp is not None else None
    people = study.participants.aggregate(
        n=Count("id"),
        flagged=Count("id", filter=Q(flagged_for_exclusion=True)),
        last=Max("id"),
        # A participant's status and wrong attention answers change without a new rating (time-outs, returns).
        complete=Count("id", filter=Q(status=Participant.Status.COMPLETED)),
        failures=Sum("attention_failures"),
    )
    conditions = list(Condition.objects.filter(study=study).values_list("name", "is_baseline", "position"))
    emotions = list(Emotion.objects.filter(prompts__study=study).distinct().values_list("name", "valence"))
    planned = study_planned(study=study)
    raw = repr(
        (
            answers,
            people,
            sorted(conditions),
            sorted(emotions),
            study.scale,
            study.kind,
            study.seed,
            study.exclusion_rules,
            study_alpha(study=study, planned=planned),
            sorted(planned.items()),
        )
    )
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def study_analyze_cached(*, study: Study, options: AnalysisOptions | None = None) -> Any:
    """`study_analyze`, remembered for a few minutes in the cache under the data's fingerprint and the options:
    the dashboard, its figures and its tables share one computation, and any new rating starts a fresh one."""
    options = options or AnalysisOptions()
    key = f"analysis:{study.pk}:{study_data_fingerprint(study=study)}:{hashlib.sha256(repr(options).encode()).hexdigest()[:16]}"
    try:
        found = cache.get(key)
    except Exception:  # noqa: BLE001 — the cache fails open: Redis down costs a recomputation, never an error
        logger.warning("analysis cache: could not read %s", key, exc_info=True)
        found = None
    if found is not None:
        return found
    result = study_analyze(study=study, options=options)
    try:
        cache.set(key, result, CACHE_SECONDS)
    except Exception:  # noqa: BLE001 — a cache that cannot store (too big, Redis down) only costs a recomputation
        logger.warning("analysis cache: could not store %s", key, exc_info=True)
    return result
