"""python manage.py judge_report <slug> <judge> [--json] [--out DIR]: one LLM judge's report on a study."""

import json
from pathlib import Path

from django.core.management.base import CommandError

from analysis import exports
from analysis.judge_report import JudgeReportError, judge_of, judge_report_of
from studies.management.study_command import StudyCommand


class Command(StudyCommand):
    help = (
        "One LLM judge's report on a study: the verdict (may it screen models for this study?), its run, agreement "
        "with people beside people's agreement with each other, prediction-powered shares beside human-only ones, "
        "and the ranking of conditions people have not rated. --json prints one JSON object; --out DIR writes "
        "judge_report.json and one CSV per table."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("judge", help="The judge's name (unique within the study).")
        parser.add_argument("--json", action="store_true", help="Print the whole report as one JSON object.")
        parser.add_argument(
            "--out", help="Directory to write judge_report.json and the tables' CSV files into."
        )

    def handle_study(self, study, *, judge, **opts):
        try:
            report = judge_report_of(study=study, judge=judge_of(study=study, name=judge))
        except JudgeReportError as exc:
            raise CommandError(str(exc)) from None
        summary = report.summary()
        if opts["out"]:
            out = Path(opts["out"])
            out.mkdir(parents=True, exist_ok=True)
            (out / "judge_report.json").write_text(json.dumps(summary, allow_nan=False, indent=1))
            for name, table in report.tables().items():
                (out / f"{name}.csv").write_text("".join(exports.table_lines(table)), encoding="utf-8")
        if opts["json"]:
            self.stdout.write(json.dumps(summary, allow_nan=False))
            return
        self._text(report, opts["out"])

    def _text(self, report, out):
        w = self.stdout.write
        run = report.run
        w(report.verdict)
        w(
            f"Run: {run['done']} ratings done on {run['responses_rated']} responses, {run['pending']} pending, "
            f"{run['failed']} failed, ${run['cost_usd']:.4f}"
        )
        agreement = report.agreement()
        for line in agreement.itertuples():
            w(
                f"  {line.coefficient:<28} judge–human {_f(line.judge_human)} [{_f(line.judge_human_ci_low)}, "
                f"{_f(line.judge_human_ci_high)}]   human–human {_f(line.human_human)}"
            )
        top = report.scale.top_label
        if not report.screening.empty:
            w(f"Screening (ranked by the judge's {top} share):")
            for line in report.screening.to_dict(orient="records"):
                corrected = line.get(f"corrected_{top}")
                w(
                    f"  {line['rank']}. {line['condition']}: judge {100 * line[f'judge_{top}']:.1f} %"
                    + (f", corrected {100 * corrected:.1f} %" if corrected is not None else "")
                    + f" ({line['responses_judged']} responses judged, {line['human_ratings']} human ratings)"
                    + (
                        f"; 80 % power needs {_f(line['human_ratings_needed'], 0)} human ratings, "
                        f"{_f(line['ppi_ratings_needed'], 0)} with the judge"
                        if line.get("human_ratings_needed") == line.get("human_ratings_needed")
                        else ""
                    )
                )
        for note in report.notes:
            w(f"Note: {note}")
        if out:
            w(f"Written to {out}")


def _f(value, digits: int = 3) -> str:
    return "n/a" if value is None or value != value else f"{value:.{digits}f}"
