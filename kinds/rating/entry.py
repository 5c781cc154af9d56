"""The rating kind's analysis entry point (`StudyKind.analysis`); every kind names one.

An entry has `analyze(study, options)` (the analysis behind the dashboard, the API and the cache) and
`report_write(study, options, out_dir)` (what `manage.py analyze --out DIR` writes; returns the lines the
command prints). The analysts' page of a study is its kind's `analysis_page`.
"""

from __future__ import annotations

from pathlib import Path

from analysis import stats
from analysis.design import design_lines, design_of
from analysis.services import AnalysisOptions
from analysis.snapshots import PageRender
from studies.models import Study

from . import report as reports
from .analysis import rating_study_analyze
from .waves import wave_analyze


class RatingAnalysisEntry:
    """Bad/Okay/Good per condition, the tests against the baseline, the ordinal model (analysis.py)."""

    def analyze(self, study: Study, options: AnalysisOptions):
        if study.parent_id is not None:  # a follow-up wave: its whole family, and the drift test
            return wave_analyze(study=study, options=options)
        return rating_study_analyze(study=study, options=options)

    def page_render(self, analysis) -> PageRender:
        """The dashboard drawn ahead (`analysis.snapshots`): its body, figures and report.html."""
        return reports.page_render(analysis)

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


RATING_ANALYSIS = RatingAnalysisEntry()
