"""python manage.py study_status <slug> [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from studies.models import Study
from studies.selectors import STATUSES, study_status


def render_table(status: dict) -> str:
    lines = [
        f"{status['title']} ({status['study']}): {status['state']}, {status['kind']} study, "
        f"{status['prompts']} prompts, {status['items_per_participant']} items per participant",
        "",
    ]
    questionnaire = status["kind"] == "questionnaire"
    columns = ["condition", "responses", *STATUSES, "flagged", "ratings", "min/resp", "max/resp", "mean/resp"]
    if questionnaire:
        columns.append("runs")
    rows = []
    for c in status["conditions"]:
        spread = c["ratings_per_response"]
        rows.append(
            [
                c["name"] + (" *" if c["is_baseline"] else ""),
                c["responses"],
                *(c["participants"][s] for s in STATUSES),
                c["flagged_for_exclusion"],
                c["ratings"],
                "-" if spread["min"] is None else spread["min"],
                "-" if spread["max"] is None else spread["max"],
                "-" if spread["mean"] is None else f"{spread['mean']:.2f}",
                *([c["questionnaire_runs"]] if questionnaire else []),
            ]
        )
    padding = [""] * (4 if questionnaire else 3)
    unassigned = status["participants_without_condition"]
    if any(unassigned.values()):
        rows.append(["(no condition)", "", *(unassigned[s] for s in STATUSES), "", "", *padding])
    totals = status["totals"]
    rows.append(
        [
            "total",
            "",
            *(totals["participants"][s] for s in STATUSES),
            totals["flagged_for_exclusion"],
            totals["ratings"],
            *padding,
        ]
    )
    cells = [columns, *[[str(v) for v in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    for index, row in enumerate(cells):
        lines.append(
            "  ".join(
                v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if index == 0 or index == len(cells) - 2:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("")
    lines.append(
        "* baseline condition; flagged: participants flagged for exclusion (failed attention checks);"
        " ratings: of responses, attention-check pages not counted; /resp: ratings per response"
        " (staff previews never counted)"
    )
    if questionnaire:
        lines.append("runs: completed questionnaire runs (participants' and models')")
    return "\n".join(lines)


class Command(BaseCommand):
    help = "Per condition: responses, participants by status, ratings and the spread of ratings per response."

    def add_arguments(self, parser):
        parser.add_argument("study_slug")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print JSON instead of a table."
        )

    def handle(self, *args, study_slug, as_json=False, **options):
        study = Study.objects.filter(slug=study_slug).first()
        if study is None:
            raise CommandError(f"no study with slug '{study_slug}'")
        status = study_status(study=study)
        self.stdout.write(json.dumps(status, indent=2) if as_json else render_table(status))
