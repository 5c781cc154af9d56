"""The pairwise kind's analysis entry (`StudyKind.analysis`, see kinds/rating/entry.py): the study's frame
(kinds/pairwise/frame.py) handed to the Bradley–Terry analysis (kinds/pairwise/report.py: Davidson fit with
ties, two-way bootstrap intervals, win matrix, win rates against the baseline, length control, position bias,
agreement) and its outputs (`bt_scores.csv` and the other CSVs, figures, report.html).

The same result serves `manage.py analyze <slug> --out DIR` (`report_write`), the analysts' page
(kinds/pairwise/views.py, through `outputs`, reached by `analysis_entry`) and the adaptive phase of the pair schedule
(`adaptive_pair_weights`, the kind's `pair_weights`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.clustered import twoway_clustered_difference
from analysis.design import design_json_write, design_lines, design_of
from analysis.services import AnalysisError, AnalysisOptions
from generation.selectors import judge_verdicts_frame, judges_of
from studies.models import Condition, Study
from studies.selectors import study_planned_analysis
from studies.waves import family_members

from . import bradley_terry
from .frame import pairwise_exclusions, pairwise_frame
from .judge_analysis import judge_pairwise_tables
from .report import TABLE_BY_KEY, pairwise_analyze_frame, pairwise_outputs_write


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
        """The whole pairwise analysis of the study's counted answers (`pairwise_analyze_frame`); for a follow-up
        wave, of its whole family's (the parent's comparisons kept beside the wave's), with the drift test of
        the parent's pairs asked again (`result["drift"]`, `result["drift_warning"]`)."""
        frames = {member.pk: pairwise_frame(study=member, rules=options.rules) for member in _family(study)}
        frame = pd.concat(frames.values(), ignore_index=True)
        if frame.empty:
            raise AnalysisError(f"study {study.slug!r} has no answered pairs to analyse yet")
        try:
            result = pairwise_analyze_frame(
                frame,
                baseline=baseline_of(study, options),
                seed=study.seed if options.seed is None else options.seed,
                n_boot=options.bootstrap_samples,
                conditions=list(Condition.objects.filter(study=study).values_list("name", flat=True)),
            )
        except ValueError as exc:  # e.g. a condition without votes, or comparisons that do not connect
            raise AnalysisError(f"study {study.slug!r}: {exc}") from None
        result["judges"] = judge_tables(study, frame, result, options)
        planned = study_planned_analysis(study=study)
        # The pre-registered primary test, and the table that reports it (the page and the command show it first).
        result["primary_test"] = planned["primary_test"]
        result["primary_table"] = TABLE_BY_KEY[planned["primary_test"]["key"]]
        result["summary"]["primary_test"] = planned["primary_test"]
        if study.parent_id is not None:
            alpha = float(planned["alpha"])
            result["drift"], result["drift_warning"] = pairwise_drift(
                frames[study.parent_id], frames[study.pk], alpha=alpha
            )
        return result

    def outputs(self, study: Study, options: AnalysisOptions, out_dir: Path) -> list[Path]:
        """Every output file of the analysis written into `out_dir`, with the frozen design."""
        return self._write(study, options, out_dir)[0]

    def report_write(self, study: Study, options: AnalysisOptions, out_dir: Path) -> list[str]:
        written, warning, primary = self._write(study, options, out_dir)
        return [
            *([f"WARNING: {warning}"] if warning else []),
            f"Primary test (as pre-registered): {primary['name']}",
            f"{study.slug}: {len(written)} files in {out_dir}",
            f"strengths: {out_dir / 'bt_scores.csv'} (log-strengths, {baseline_of(study, options)} = 0)",
            f"report: {out_dir / 'report.html'}",
            *design_lines(design_of(study)),
        ]

    def _write(self, study: Study, options: AnalysisOptions, out_dir: Path) -> tuple[list[Path], str, dict]:
        """The output files (a wave's drift test in drift.csv), the drift warning ("" when none) and the primary
        test."""
        out_dir.mkdir(parents=True, exist_ok=True)
        result = self.result(study, options)
        written = list(pairwise_outputs_write(result, out_dir))
        if "drift" in result:
            written.append(out_dir / "drift.csv")
            result["drift"].to_csv(written[-1], index=False, lineterminator="\n")
        for name, table in result["judges"].items():
            written.append(out_dir / f"{name}.csv")
            table.to_csv(written[-1], index=False, lineterminator="\n")
        written.append(out_dir / "exclusions.csv")
        pairwise_exclusions(study=study, rules=options.rules).to_csv(
            written[-1], index=False, lineterminator="\n"
        )
        written.append(design_json_write(design_of(study), out_dir / "design.json"))
        return written, result.get("drift_warning", ""), result["primary_test"]


def judge_tables(study: Study, frame: pd.DataFrame, result: dict, options: AnalysisOptions) -> dict:
    """The tables of the study's LLM judges (kinds/pairwise/judge_analysis.py), their verdicts read through
    generation.selectors (never mixed into the people's votes), calibrated against `frame` (the people's counted
    votes) and beside `result`'s strengths; {} when no judge has answered both orders of a pair."""
    verdicts = [judge_verdicts_frame(judge=judge) for judge in judges_of(study=study)]
    verdicts = [v for v in verdicts if not v.empty]
    if not verdicts:
        return {}
    return judge_pairwise_tables(
        pd.concat(verdicts, ignore_index=True),
        frame,
        result.get("bt_scores"),
        baseline=baseline_of(study, options),
        conditions=list(Condition.objects.filter(study=study).values_list("name", flat=True)),
        n_boot=options.bootstrap_samples,
        seed=study.seed if options.seed is None else options.seed,
    )


def _family(study: Study) -> list[Study]:
    """The studies whose votes a study's analysis takes: itself, and for a follow-up wave its whole family."""
    return family_members(study) if study.parent_id is not None else [study]


def _stored_pair_votes(frame: pd.DataFrame, stored: set[str]) -> pd.DataFrame:
    """Non-tied votes of `frame` on pairs of two `stored` conditions, with `unit` (prompt and condition pair) and
    `y` (1 when the pair's first condition, by name, won)."""
    both = frame["left_condition"].isin(stored) & frame["right_condition"].isin(stored)
    votes = frame[both & (frame["choice"] != "tie")]
    first = votes[["left_condition", "right_condition"]].min(axis=1)
    second = votes[["left_condition", "right_condition"]].max(axis=1)
    winner = votes["left_condition"].where(votes["choice"] == "left", votes["right_condition"])
    return pd.DataFrame(
        {
            "unit": votes["prompt_id"] + "|" + first + "|" + second,
            "rater": votes["participant"],
            "y": (winner == first).astype(float),
        }
    )


def pairwise_drift(original: pd.DataFrame, again: pd.DataFrame, *, alpha: float) -> tuple[pd.DataFrame, str]:
    """The drift test of a follow-up wave: its votes on the parent's pairs of stored conditions, asked again,
    against the parent's votes on the same prompts and pairs. The share of non-tied votes going to each pair's
    first condition (by name), paired by prompt and pair, clustered by rater and by prompt-pair
    (`twoway_clustered_difference`). One-row table (with `warning`, "" unless the test rejects at `alpha`)."""
    stored = set(original["left_condition"]) | set(original["right_condition"])
    before, after = _stored_pair_votes(original, stored), _stored_pair_votes(again, stored)
    line: dict = {"votes_original": len(before), "votes_again": len(after), "alpha": alpha, "warning": ""}
    if before.empty or after.empty:
        line["note"] = "no re-asked pairs yet" if after.empty else "the parent has no votes on its pairs"
        return pd.DataFrame([line]), ""
    joined = pd.concat([before.assign(side=0), after.assign(side=1)], ignore_index=True)
    rater = joined["side"].astype(str) + ":" + joined["rater"].astype(str)
    try:
        d = twoway_clustered_difference(
            joined["y"].to_numpy(), joined["side"].to_numpy(), joined["unit"].to_numpy(), rater.to_numpy(),
            level=1 - alpha,
        )  # fmt: skip
    except ValueError as exc:
        line["note"] = str(exc)
        return pd.DataFrame([line]), ""
    line.update(difference=d.estimate, se=d.se, p=d.p, ci_low=d.ci_low, ci_high=d.ci_high)
    if d.p < alpha:
        line["warning"] = (
            f"Rater drift: asked again, the parent's pairs went to their first condition {d.estimate:+.1%} points "
            f"differently from the original votes ({1 - alpha:.0%} CI {d.ci_low:+.1%} to {d.ci_high:+.1%}; "
            f"p = {d.p:.3g}). Part of any difference between the new conditions and the stored ones may come "
            "from the raters, not the models."
        )
    return pd.DataFrame([line]), line["warning"]


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
