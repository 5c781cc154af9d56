"""Each study kind's analysis entry point, named by the kind (`StudyKind.analysis`, studies/kinds/).

An entry has `analyze(study, options)` (the analysis behind the dashboard, the API and the cache) and
`report_write(study, options, out_dir)` (what `manage.py analyze --out DIR` writes; returns the lines the
command prints). The analysts' page of a study is its kind's `analysis_page`.
"""

from __future__ import annotations

from pathlib import Path

from studies.kinds import NoQuestionnaire, questionnaire_with_instrument
from studies.models import Study

from . import reports, stats
from .design import design_json_write, design_lines, design_of
from .emotionbench import emotionbench_analyse
from .emotionbench_report import emotionbench_report_text, emotionbench_report_write
from .services import AnalysisError, AnalysisOptions, rating_study_analyze
from .waves import wave_analyze


class RatingAnalysisEntry:
    """Bad/Okay/Good per condition, the tests against the baseline, the ordinal model (analysis.services)."""

    def analyze(self, study: Study, options: AnalysisOptions):
        if study.parent_id is not None:  # a follow-up wave: its whole family, and the drift test
            return wave_analyze(study=study, options=options)
        return rating_study_analyze(study=study, options=options)

    def report_write(self, study: Study, options: AnalysisOptions, out_dir: Path) -> list[str]:
        analysis = self.analyze(study, options)
        written = reports.report_write(analysis=analysis, out_dir=out_dir)
        drift = getattr(analysis, "drift_warning", "")
        return [
            *([f"WARNING: {drift}"] if drift else []),
            *reports.exclusion_lines(analysis),
            reports.planned_line(analysis),
            stats.primary_line(analysis.primary_test),
            f"{study.slug}: {analysis.n_rows} of {analysis.n_rows_before} ratings analysed; "
            f"{len(written)} files in {out_dir}",
            f"report: {out_dir / 'report.html'}",
            *design_lines(design_of(study)),
        ]


class QuestionnaireAnalysisEntry:
    """The EmotionBench paper's table: default PA/NA and their change per emotion (analysis.emotionbench)."""

    def analyze(self, study: Study, options: AnalysisOptions):
        # The rating dashboard, API and cache speak of ratings; this kind has its own page and command output.
        raise AnalysisError(
            f"study {study.slug!r} is a questionnaire study: its analysis is at /analysis/{study.slug}/emotionbench/"
        )

    def report_write(self, study: Study, options: AnalysisOptions, out_dir: Path) -> list[str]:
        try:
            questionnaire_with_instrument(study)
        except NoQuestionnaire as exc:
            raise AnalysisError(str(exc)) from None
        analysis = emotionbench_analyse(study=study)
        written = emotionbench_report_write(analysis=analysis, out_dir=out_dir)
        design = design_of(study)
        written.append(design_json_write(design, out_dir / "design.json"))
        return [
            emotionbench_report_text(analysis=analysis),
            f"\n{study.slug}: {len(written)} files in {out_dir}",
            *design_lines(design),
        ]


RATING_ANALYSIS = RatingAnalysisEntry()
QUESTIONNAIRE_ANALYSIS = QuestionnaireAnalysisEntry()
