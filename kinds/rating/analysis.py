"""The rating kind's analysis: Bad/Okay/Good per condition, the tests against the baseline, the ordinal model, the
exclusions' effect and the bootstrap, from one query (`frame.rating_rows_frame`). Its entry point is entry.py; the
statistics it shares with other kinds are analysis/'s (exclusions, clustered tests, bootstrap); those only it
uses are analysis/stats.py's and analysis/ordinal.py's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from django.core.exceptions import ValidationError

from analysis import exclusions, selectors, stats
from analysis.authenticity import authenticity_sensitivity
from analysis.ordinal import OrdinalFit, ordinal_model
from analysis.services import (
    AnalysisError,
    AnalysisOptions,
    baseline_choose,
    jsonable,
    study_alpha,
    study_planned,
)
from studies.models import Study
from studies.planned_analysis import correction_name

from .frame import rating_rows_frame
from .report import main_table


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

    def page_tables(self) -> dict[str, pd.DataFrame]:
        """The tables the dashboard and the API offer as CSV files: the main tests, then `tables()`."""
        return {"main_tests": main_table(self), **self.tables()}

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (the API's aggregates)."""
        return jsonable(
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
    rows = rating_rows_frame(study=study)
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
    """The rating analysis of `rows` (a `rating_rows_frame`, or several studies' frames joined, as
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
