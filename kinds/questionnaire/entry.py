"""The questionnaire kind's analysis entry (`StudyKind.analysis`): the EmotionBench paper's table, written by the
`analyze` command; its page is kinds/questionnaire/views.py."""

from __future__ import annotations

from pathlib import Path

from analysis.design import design_json_write, design_lines, design_of
from analysis.services import AnalysisError, AnalysisOptions
from studies.kinds import NoQuestionnaire, questionnaire_with_instrument
from studies.models import Study

from .analysis import emotionbench_analyse
from .report import emotionbench_report_text, emotionbench_report_write


class QuestionnaireAnalysisEntry:
    """The EmotionBench paper's table: default PA/NA and their change per emotion (kinds.questionnaire.analysis)."""

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


QUESTIONNAIRE_ANALYSIS = QuestionnaireAnalysisEntry()
