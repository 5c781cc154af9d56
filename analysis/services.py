"""The analysis of a study: one entry point per study kind (named by the kind, see kinds/rating/entry.py).

`study_analyze` is what the dashboard, the `analyze` command, the report and the API all call, so they never
disagree. It only reads (through `analysis.selectors`).
"""

from __future__ import annotations

import hashlib
import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from django.core.cache import cache
from django.core.exceptions import ValidationError

from analysis import exclusions, selectors, stats
from analysis.authenticity import authenticity_sensitivity
from analysis.ordinal import OrdinalFit, ordinal_model
from studies.kinds import kind_of, resolved
from studies.models import Study
from studies.planned_analysis import correction_name
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


@dataclass
class RatingAnalysis:
    study_slug: str
    study_title: str
    kind: str
    conditions: list[str]
    baseline: str
    scale: stats.Scale
    options: AnalysisOptions
    rules: exclusions.ExclusionRules
    rules_declared: bool  # the rules applied are the study's declared ones (not overridden)
    declared_rules: dict
    alpha: float
    exclusions: pd.DataFrame
    participant_flags: pd.DataFrame
    n_rows: int
    n_rows_before: int
    sensitivity: pd.DataFrame = field(default_factory=pd.DataFrame)
    sensitivity_lines: list[str] = field(default_factory=list)
    # The headline with and without the participants the authenticity score flags (analysis/authenticity.py).
    authenticity_sensitivity: pd.DataFrame = field(default_factory=pd.DataFrame)
    authenticity_lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    distribution: pd.DataFrame = field(default_factory=pd.DataFrame)
    distribution_by_valence: pd.DataFrame = field(default_factory=pd.DataFrame)
    distribution_by_emotion: pd.DataFrame = field(default_factory=pd.DataFrame)
    change: pd.DataFrame = field(default_factory=pd.DataFrame)
    change_by_valence: pd.DataFrame = field(default_factory=pd.DataFrame)
    change_by_emotion: pd.DataFrame = field(default_factory=pd.DataFrame)
    tests: pd.DataFrame = field(default_factory=pd.DataFrame)
    ordinal: OrdinalFit | None = None
    bootstrap_shares: pd.DataFrame = field(default_factory=pd.DataFrame)
    bootstrap_change: pd.DataFrame = field(default_factory=pd.DataFrame)
    bootstrap_change_by_valence: pd.DataFrame = field(default_factory=pd.DataFrame)
    agreement: stats.Agreement | None = None
    notes: list[str] = field(default_factory=list)
    # The planned analysis applied (tests, alpha, correction) and the frozen design it was read from (None: a draft).
    planned: dict = field(default_factory=dict)

    @property
    def correction(self) -> str:
        return self.planned.get("correction", "holm")

    @property
    def primary_test(self) -> dict:
        """The pre-registered primary test ({"key", "name"}, the kind's declaration as frozen): the tests table's
        rows under `stats.TEST_BY_KEY[key]` are reported as primary."""
        return self.planned.get("primary_test") or {"key": "clustered", "name": stats.TEST_CLUSTERED}

    def primary_rows(self) -> pd.DataFrame:
        """The rows of the tests table that report the pre-registered primary test."""
        if self.tests.empty:
            return self.tests
        return self.tests[self.tests["test"] == stats.TEST_BY_KEY[self.primary_test["key"]]]

    @property
    def correction_name(self) -> str:
        return correction_name(self.correction)

    @property
    def planned_source(self) -> str:
        sha = self.planned.get("design_sha256")
        return f"the frozen design {sha}" if sha else "the draft's current design (not frozen yet)"

    @property
    def empty(self) -> bool:
        return self.n_rows == 0

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table, by the file name (without .csv) it is written under."""
        out = {
            "exclusions": self.exclusions,
            "sensitivity": self.sensitivity,
            "sensitivity_authenticity": self.authenticity_sensitivity,
            "distribution": self.distribution,
            "distribution_by_valence": self.distribution_by_valence,
            "distribution_by_emotion": self.distribution_by_emotion,
            "change_vs_baseline": self.change,
            "change_vs_baseline_by_valence": self.change_by_valence,
            "change_vs_baseline_by_emotion": self.change_by_emotion,
            "tests": self.tests,
            "bootstrap_shares": self.bootstrap_shares,
            "bootstrap_change": self.bootstrap_change,
            "bootstrap_change_by_valence": self.bootstrap_change_by_valence,
        }
        if self.ordinal is not None:
            out["ordinal_model"] = self.ordinal.coefficients
        return out

    def main_tests(self) -> pd.DataFrame:
        """The report's main table: the pre-registered primary test (the participant-clustered comparison of each
        condition with the baseline), then the seed study's omnibus test and 2×2 Yates test, overall, by valence
        and per emotion."""
        if self.tests.empty:
            return self.tests
        primary = self.primary_rows()
        papers = self.tests[self.tests["test"].isin([stats.TEST_OMNIBUS, stats.TEST_2X2])]
        papers = papers[~papers.index.isin(primary.index)]
        return pd.concat([primary, papers]).reset_index(drop=True)

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (the API's aggregates)."""
        return _jsonable(
            {
                "study": self.study_slug,
                "title": self.study_title,
                "kind": self.kind,
                "conditions": self.conditions,
                "baseline": self.baseline,
                "scale": [
                    {"value": v, "label": label}
                    for v, label in zip(self.scale.values, self.scale.labels, strict=True)
                ],
                "exclusion_rules": self.rules.describe(),
                "exclusion_rules_applied": self.rules.as_declared(),
                "exclusion_rules_declared": self.declared_rules,
                "exclusion_rules_are_declared": self.rules_declared,
                "alpha": self.alpha,
                "correction": self.correction,
                "planned_analysis": self.planned,
                "warnings": self.warnings,
                "sensitivity": self.sensitivity.to_dict(orient="records"),
                "sensitivity_lines": self.sensitivity_lines,
                "authenticity_sensitivity": self.authenticity_sensitivity.to_dict(orient="records"),
                "authenticity_lines": self.authenticity_lines,
                "bootstrap_samples": self.options.bootstrap_samples,
                "seed": self.options.seed,
                "notes": self.notes,
                "exclusions": self.exclusions.to_dict(orient="records"),
                "distribution": self.distribution.to_dict(orient="records"),
                "distribution_by_valence": self.distribution_by_valence.to_dict(orient="records"),
                "distribution_by_emotion": self.distribution_by_emotion.to_dict(orient="records"),
                "change_vs_baseline": self.change.to_dict(orient="records"),
                "change_vs_baseline_by_valence": self.change_by_valence.to_dict(orient="records"),
                "change_vs_baseline_by_emotion": self.change_by_emotion.to_dict(orient="records"),
                "tests": self.tests.to_dict(orient="records"),
                "ordinal_model": self.ordinal.as_dict() if self.ordinal else None,
                "bootstrap_shares": self.bootstrap_shares.to_dict(orient="records"),
                "bootstrap_change": self.bootstrap_change.to_dict(orient="records"),
                "bootstrap_change_by_valence": self.bootstrap_change_by_valence.to_dict(orient="records"),
                "agreement": self.agreement.__dict__ if self.agreement else None,
            }
        )


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
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
    """Changes whenever anything the analysis reads changes: ratings, participants' exclusion flags, conditions,
    emotions' valence groups, the study's scale. Three small aggregate queries."""
    from django.db.models import Count, Max, Q, Sum

    from studies.models import Condition, Emotion, Participant

    ratings = selectors.rating_queryset(study=study).aggregate(n=Count("id"), last=Max("id"))
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
            ratings,
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


def rating_study_analyze(*, study: Study, options: AnalysisOptions) -> RatingAnalysis:
    """Statistics of a rating study (live, closed or imported), from one query. Guarantees: previews and
    attention-check pages never count; exclusions follow `options.rules`, by default the rules the study declared,
    and are reported per rule and condition with a test of whether they differ between conditions (a warning at
    the study's alpha) and the headline without and with them; when they remove most ratings a note says which rule
    removed what; the same rows, rules and seed give the same numbers (bootstrap included)."""
    if options.seed is None:
        options.seed = int(study.seed)
    infos = selectors.condition_list(study=study)
    baseline = baseline_choose(conditions=infos, requested=options.baseline)
    conditions = [c.name for c in infos]
    scale = stats.Scale.from_study_scale(study.scale)
    rows = selectors.rating_rows_frame(study=study)
    return rating_frame_analyze(
        rows, study=study, conditions=conditions, baseline=baseline, scale=scale, options=options
    )


def rating_frame_analyze(
    rows: pd.DataFrame,
    *,
    study: Study,
    conditions: list[str],
    baseline: str,
    scale: stats.Scale,
    options: AnalysisOptions,
) -> RatingAnalysis:
    """The rating analysis of `rows` (a `selectors.rating_rows_frame`, or several studies' frames joined, as
    the analysis of a wave does: analysis/waves.py)."""
    unknown = sorted(set(rows["value"]) - set(scale.values))
    if unknown:
        raise AnalysisError(
            f"ratings with values {unknown} are not on the study's scale {list(scale.values)}"
        )
    try:
        declared = exclusions.ExclusionRules.from_declared(study.exclusion_rules)
    except ValidationError as exc:
        raise AnalysisError(
            f"the study's declared exclusion rules are invalid: {'; '.join(exc.messages)}"
        ) from None
    rules = options.rules if options.rules is not None else declared
    planned = study_planned(study=study)
    alpha = study_alpha(study=study, planned=planned)
    kept, flags, summary = exclusions.exclusions_apply(
        rows, rules, conditions=conditions, alpha=alpha, seed=options.seed
    )
    result = RatingAnalysis(
        study_slug=study.slug,
        study_title=study.title,
        kind=study.kind,
        conditions=conditions,
        baseline=baseline,
        scale=scale,
        options=options,
        rules=rules,
        rules_declared=rules == declared,
        declared_rules=study.exclusion_rules,
        alpha=alpha,
        exclusions=summary,
        participant_flags=flags,
        n_rows=len(kept),
        n_rows_before=len(rows),
        planned=planned,
    )
    result.warnings = exclusions.differential_warnings(summary, alpha=alpha)
    result.notes += exclusions.removal_notes(summary)
    if rows.empty:
        result.notes.append("no ratings to analyse yet")
        return result
    result.sensitivity = exclusions.sensitivity_table(rows, kept, scale, conditions, baseline, alpha=alpha)
    result.sensitivity_lines = exclusions.sensitivity_sentences(
        result.sensitivity, scale, baseline, alpha=alpha
    )
    result.authenticity_sensitivity, result.authenticity_lines = authenticity_sensitivity(
        rows, rules, scale, conditions, baseline, alpha=alpha, seed=options.seed
    )
    if kept.empty:
        return result
    result.distribution = stats.distribution_table(kept, scale, ["condition"], conditions)
    result.distribution_by_valence = stats.distribution_table(
        kept, scale, ["valence", "condition"], conditions
    )
    result.distribution_by_emotion = stats.distribution_table(
        kept, scale, ["emotion", "condition"], conditions
    )
    result.change = stats.change_table(result.distribution, scale, baseline, [])
    result.change_by_valence = stats.change_table(
        result.distribution_by_valence, scale, baseline, ["valence"]
    )
    result.change_by_emotion = stats.change_table(
        result.distribution_by_emotion, scale, baseline, ["emotion"]
    )
    result.tests = stats.tests_table(
        kept, scale, conditions, baseline, correction=result.correction, alpha=alpha
    )
    result.ordinal = ordinal_model(kept, conditions, baseline, with_emotion=options.ordinal_with_emotion)
    if result.ordinal.note:
        result.notes.append(f"proportional-odds model: {result.ordinal.note}")
    result.bootstrap_shares, result.bootstrap_change = stats.bootstrap_shares(
        kept, scale, conditions, baseline, b=options.bootstrap_samples, seed=options.seed
    )
    _, result.bootstrap_change_by_valence = stats.bootstrap_shares(
        kept, scale, conditions, baseline, b=options.bootstrap_samples, seed=options.seed + 1, by="valence"
    )
    result.agreement = stats.agreement(kept, scale)
    return result
