"""The pairwise kind's analysis entry (`StudyKind.analysis`, see analysis/entries.py): the study's frame
(analysis/pairwise_frame.py) handed to the Bradley–Terry analysis (analysis/pairwise_report.py: Davidson fit with
ties, two-way bootstrap intervals, win matrix, win rates against the baseline, length control, position bias,
agreement) and its outputs (`bt_scores.csv` and the other CSVs, figures, report.html).

The same result serves `manage.py analyze <slug> --out DIR` (`report_write`), the analysts' page
(analysis/pairwise_views.py, through `outputs`, reached by `analysis_entry`) and the adaptive phase of the pair schedule
(`adaptive_pair_weights`, the kind's `pair_weights`).
"""

from __future__ import annotations

from pathlib import Path

from studies.models import Condition, Study

from . import bradley_terry
from .design import design_json_write, design_lines, design_of
from .pairwise_frame import pairwise_frame
from .pairwise_report import pairwise_analyze_frame, pairwise_outputs_write
from .services import AnalysisError, AnalysisOptions


def baseline_of(study: Study, options: AnalysisOptions) -> str:
    """The condition strengths are relative to: the one asked for, else the study's baseline condition."""
    names = list(Condition.objects.filter(study=study).values_list("name", "is_baseline"))
    if options.baseline is not None:
        if options.baseline not in {name for name, _ in names}:
            raise AnalysisError(f"study {study.slug!r} has no condition {options.baseline!r}")
        return options.baseline
    marked = [name for name, is_baseline in names if is_baseline]
    if not marked:
        raise AnalysisError(f"study {study.slug!r} has no baseline condition: pass --baseline")
    return marked[0]


class PairwiseAnalysisEntry:
    """Bradley–Terry strengths of the conditions, the baseline at 0."""

    def analyze(self, study: Study, options: AnalysisOptions):
        # The rating dashboard, API and cache speak of ratings; this kind has its own page and command output.
        raise AnalysisError(
            f"study {study.slug!r} is a pairwise study: its analysis is at /analysis/{study.slug}/pairwise/"
        )

    def result(self, study: Study, options: AnalysisOptions) -> dict:
        """The whole pairwise analysis of the study's counted answers (`pairwise_analyze_frame`)."""
        frame = pairwise_frame(study=study, rules=options.rules)
        if frame.empty:
            raise AnalysisError(f"study {study.slug!r} has no answered pairs to analyse yet")
        try:
            return pairwise_analyze_frame(
                frame,
                baseline=baseline_of(study, options),
                seed=study.seed if options.seed is None else options.seed,
                n_boot=options.bootstrap_samples,
                conditions=list(Condition.objects.filter(study=study).values_list("name", flat=True)),
            )
        except ValueError as exc:  # e.g. a condition without votes, or comparisons that do not connect
            raise AnalysisError(f"study {study.slug!r}: {exc}") from None

    def outputs(self, study: Study, options: AnalysisOptions, out_dir: Path) -> list[Path]:
        """Every output file of the analysis written into `out_dir`, with the frozen design."""
        out_dir.mkdir(parents=True, exist_ok=True)
        written = list(pairwise_outputs_write(self.result(study, options), out_dir))
        written.append(design_json_write(design_of(study), out_dir / "design.json"))
        return written

    def report_write(self, study: Study, options: AnalysisOptions, out_dir: Path) -> list[str]:
        written = self.outputs(study, options, out_dir)
        return [
            f"{study.slug}: {len(written)} files in {out_dir}",
            f"strengths: {out_dir / 'bt_scores.csv'} (log-strengths, {baseline_of(study, options)} = 0)",
            f"report: {out_dir / 'report.html'}",
            *design_lines(design_of(study)),
        ]


def adaptive_pair_weights(study: Study) -> dict[tuple[int, int], float]:
    """The adaptive phase's weight of each condition pair ({(condition id, condition id): weight}, smaller id
    first), from the study's counted answers so far (`bradley_terry.adaptive_pair_weights`: pairs whose
    strengths' intervals overlap most weigh most, none above the study's cap)."""
    settings = study.pairwise_settings
    ids = dict(Condition.objects.filter(study=study).values_list("name", "pk"))
    n_pairs = len(ids) * (len(ids) - 1) // 2
    weights = bradley_terry.adaptive_pair_weights(
        pairwise_frame(study=study),
        sorted(ids),
        warmup=settings.adaptive_after or 0,
        cap=max(settings.adaptive_max_share, 1 / max(n_pairs, 1)),  # a cap below an equal share cannot hold
    )
    out = {}
    for (a, b), weight in weights.items():
        key = (min(ids[a], ids[b]), max(ids[a], ids[b]))
        out[key] = float(weight)
    return out


PAIRWISE_ANALYSIS = PairwiseAnalysisEntry()
