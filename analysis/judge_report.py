"""One judge's report for one study: calibration, prediction-powered shares, and the screening of conditions people
have not rated yet. Pure functions over DataFrames (`judge_report_build`) and a thin loader (`judge_report_of`)
that reads the human ratings through the kind (`StudyKind.scale_answers`, after the study's declared exclusion rules, as the
study's analysis counts them) and the judge's through generation.selectors. Judge ratings never enter a human
statistic: they are only ever beside them.

Conventions
-----------
* A judge with several samples per response: the calibration takes one value per response, the LOWER MEDIAN of
  its samples (a value of the scale; with one sample, that sample). PPI takes the samples' shares per response
  (analysis.ppi).
* Screened conditions: conditions the judge rated with fewer than `SCREEN_MAX_HUMAN` counted human ratings.
  Ranked by the judge's top-value share (a CLT interval over the judged responses, each response weighing its
  samples' share).
* Bias-corrected ("PPI-ready") shares: the judge's distribution q in the condition, with the calibration's
  misclassification matrix M[v, u] = P(judge says u | person says v) inverted: corrected = q · M⁻¹
  (analysis.judge_screening.corrected_shares). This assumes the judge errs on the new condition's text as it
  erred on the calibrated conditions, at the same human rating (the calibration's condition check tests exactly
  that there). 95 % percentile bootstrap: the condition's judged responses and each human value's row of the
  confusion resampled (multinomially) together, `SCREEN_BOOTSTRAP` replicates, seeded by the study's seed.
* Human ratings PPI would need: analysis.power.power_plan with the baseline's observed shares (the seed study's
  published human shares when it has fewer than 30 counted ratings), the condition's corrected shares, the
  calibration's per-value indicator correlations, and N/n judge-only per human rating = (responses judged − n)/n
  with n the human-only requirement (a conservative ratio: PPI's own smaller n leaves more judge-only responses).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from analysis import exclusions, selectors, stats
from analysis.calibration import Calibration, calibrate
from analysis.judge_screening import judge_per_response, screening_table
from analysis.ppi import ppi_share_table
from analysis.services import baseline_choose, jsonable, study_alpha
from generation.selectors import judge_rates_scale, judge_ratings_frame, judge_run_summary, judges_of
from studies.kinds import kind_of, resolved
from studies.models import Study

CALIBRATION_BOOTSTRAP = 1000


class JudgeReportError(ValueError):
    """The report cannot be built as asked (no such judge, a study of another kind...)."""


@dataclass
class JudgeReport:
    study: str
    study_title: str
    judge: str
    model: str
    scale: stats.Scale
    baseline: str
    run: dict
    calibration: Calibration | None
    calibration_note: str = ""
    shares: pd.DataFrame = field(default_factory=pd.DataFrame)
    differences: pd.DataFrame = field(default_factory=pd.DataFrame)
    screening: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.calibration is None:
            return f"NOT CALIBRATED: {self.calibration_note}"
        return self.calibration.verdict

    @property
    def may_screen(self) -> bool:
        return bool(self.calibration and self.calibration.may_screen)

    def agreement(self) -> pd.DataFrame:
        """Judge–human beside human–human: one line per coefficient."""
        if self.calibration is None:
            return pd.DataFrame()
        lines = []
        for name, label in (
            ("alpha", "Krippendorff's α (ordinal)"),
            ("kappa_linear", "weighted κ (linear)"),
            ("kappa_quadratic", "weighted κ (quadratic)"),
        ):
            line: dict[str, Any] = {"coefficient": label}
            for who, pair in (
                ("judge_human", self.calibration.judge_human),
                ("human_human", self.calibration.human_human),
            ):
                c = getattr(pair, name)
                line[who] = c.value if c else np.nan
                line[f"{who}_ci_low"] = c.ci_low if c else np.nan
                line[f"{who}_ci_high"] = c.ci_high if c else np.nan
            lines.append(line)
        return pd.DataFrame(lines)

    def confusion(self) -> pd.DataFrame:
        if self.calibration is None:
            return pd.DataFrame()
        labels = dict(zip(self.scale.values, self.scale.labels, strict=True))
        table = self.calibration.confusion.rename(index=labels, columns=labels)
        table.columns = [f"judge {c}" for c in table.columns]
        return table.rename_axis("human").reset_index()

    def length_bias(self) -> pd.DataFrame:
        if self.calibration is None or not self.calibration.length:
            return pd.DataFrame()
        return pd.DataFrame(
            [{"correlation_with_length": k, **vars(v)} for k, v in self.calibration.length.items()]
        )

    def alt_test(self) -> pd.DataFrame:
        if self.calibration is None or not self.calibration.alt_test.applicable:
            return pd.DataFrame()
        return self.calibration.alt_test.per_annotator

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table, by the file name (without .csv) it is written under."""
        c = self.calibration
        return {
            "judge_agreement": self.agreement(),
            "judge_confusion": self.confusion(),
            "judge_by_valence": c.by_valence if c else pd.DataFrame(),
            "judge_by_emotion": c.by_emotion if c else pd.DataFrame(),
            "judge_alt_test": self.alt_test(),
            "judge_length_bias": self.length_bias(),
            "judge_condition_bias": c.conditions if c else pd.DataFrame(),
            "judge_ppi_shares": self.shares,
            "judge_ppi_differences": self.differences,
            "judge_screening": self.screening,
        }

    def summary(self) -> dict[str, Any]:
        """JSON-ready: the verdict, the run, the calibration's headline figures and every table's rows."""
        c = self.calibration
        alt = c.alt_test if c else None
        return jsonable(
            {
                "study": self.study,
                "judge": self.judge,
                "model": self.model,
                "baseline": self.baseline,
                "scale": [
                    {"value": v, "label": label}
                    for v, label in zip(self.scale.values, self.scale.labels, strict=True)
                ],
                "verdict": self.verdict,
                "may_screen": self.may_screen,
                "reasons": c.reasons if c else [self.calibration_note],
                "calibrated_responses": c.responses if c else 0,
                "indicator_correlations": c.indicator_correlations if c else {},
                "alt_test": None
                if alt is None
                else {
                    "applicable": alt.applicable,
                    "annotators": alt.annotators,
                    "epsilon": alt.epsilon,
                    "q": alt.q,
                    "winning_rate": alt.winning_rate,
                    "advantage_probability": alt.advantage_probability,
                    "passed": alt.passed,
                    "note": alt.note,
                },
                "run": self.run,
                "notes": self.notes,
                "tables": {name: t.to_dict(orient="records") for name, t in self.tables().items()},
            }
        )


# --- The report from frames ---------------------------------------------------------------------------------


def judge_report_build(
    *,
    human: pd.DataFrame,
    judge: pd.DataFrame,
    scale: stats.Scale,
    baseline: str,
    items_per_participant: int,
    run: dict,
    study: str = "",
    study_title: str = "",
    judge_name: str = "",
    model: str = "",
    seed: int = 0,
    b: int = CALIBRATION_BOOTSTRAP,
) -> JudgeReport:
    """The report from plain frames. human: one row per counted human rating (response_id, rater, value,
    condition, emotion, valence); judge: generation.selectors.judge_ratings_frame's columns."""
    report = JudgeReport(
        study=study,
        study_title=study_title,
        judge=judge_name,
        model=model,
        scale=scale,
        baseline=baseline,
        run=run,
        calibration=None,
    )
    single = judge_per_response(judge)
    calibrated = single[single["response_id"].isin(human["response_id"])]
    if judge.empty:
        report.calibration_note = "the judge has rated no response yet"
    elif calibrated.empty:
        report.calibration_note = "the judge has rated none of the responses people rated"
    else:
        words = judge.groupby("response_id")["words"].first()
        report.calibration = calibrate(
            human=human,
            judge=calibrated,
            scale=list(scale.values),
            baseline=baseline,
            words=words,
            b=b,
            seed=seed,
        )
    if not judge.empty and not human.empty:
        report.shares, report.differences = ppi_share_table(
            human=human,
            judge=judge,
            values=list(scale.values),
            labels=list(scale.labels),
            baseline=baseline,
        )
    c = report.calibration
    report.screening, report.notes = screening_table(
        human=human,
        judge=judge,
        scale=scale,
        baseline=baseline,
        confusion=c.confusion.to_numpy() if c is not None else None,
        correlations=c.indicator_correlations if c is not None else None,
        items_per_participant=items_per_participant,
        seed=seed,
    )
    if c is not None and not c.may_screen and not report.screening.empty:
        report.notes.insert(0, "this judge may not screen models for this study: read its ranking with care")
    return report


# --- The loader ----------------------------------------------------------------------------------------------


def human_ratings_frame(*, study: Study) -> pd.DataFrame:
    """The study's counted human ratings after its declared exclusion rules, as calibrate() takes them (its kind's
    answers on the scale, `StudyKind.scale_answers`)."""
    answers = kind_of(study).scale_answers
    if answers is None:
        raise JudgeReportError(f"study {study.slug!r} is a {study.kind} study: it has no answers on a scale")
    rows = resolved(answers)(study=study)
    conditions = [c.name for c in selectors.condition_list(study=study)]
    rules = exclusions.ExclusionRules.from_declared(study.exclusion_rules)
    kept, _, _ = exclusions.exclusions_apply(
        rows, rules, conditions=conditions, alpha=study_alpha(study=study), seed=int(study.seed)
    )
    out = kept.rename(columns={"participant_id": "rater"})
    return out[["response_id", "rater", "value", "condition", "emotion", "valence"]].reset_index(drop=True)


def judge_of(*, study: Study, name: str):
    """The study's judge called `name`; raises JudgeReportError."""
    for judge in judges_list(study=study):
        if judge.name == name:
            return judge
    raise JudgeReportError(f"study {study.slug!r} has no judge {name!r}")


def judges_list(*, study: Study) -> list:
    return judges_of(study=study)


def judge_report_of(*, study: Study, judge, b: int = CALIBRATION_BOOTSTRAP) -> JudgeReport:
    """The report of one judge of a study of a judged kind (`StudyKind.judged`), from the database (only
    reads)."""
    if not judge_rates_scale(study=study):
        where = kind_of(study).analysis_url(study)
        raise JudgeReportError(
            f"study {study.slug!r} is a {study.kind} study: its judges do not rate responses on a scale"
            + (f"; they are reported with its analysis ({where}, and analyze --out)" if where else "")
        )
    if judge.study_id != study.pk:
        raise JudgeReportError(f"judge {judge.name!r} belongs to another study")
    infos = selectors.condition_list(study=study)
    return judge_report_build(
        human=human_ratings_frame(study=study),
        judge=judge_ratings_frame(judge=judge),
        scale=stats.Scale.from_study_scale(study.scale),
        baseline=baseline_choose(conditions=infos, requested=None),
        items_per_participant=study.items_per_participant,
        run=judge_run_summary(judge=judge),
        study=study.slug,
        study_title=study.title,
        judge_name=judge.name,
        model=judge.model,
        seed=int(study.seed),
        b=b,
    )
