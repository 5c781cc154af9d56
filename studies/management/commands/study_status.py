"""python manage.py study_status <slug> [--json]"""

import json

from studies.management.study_command import StudyCommand
from studies.selectors import STATUSES, status_cell, study_status


def render_table(status: dict) -> str:
    lines = [
        ", ".join(
            [
                f"{status['title']} ({status['study']}): {status['state']}",
                f"{status['kind']} study",
                *status["summary"],
            ]
        ),
        "",
    ]
    own = [(column["key"], column["header"]) for column in status["columns"]]
    columns = ["condition", *STATUSES, "flagged", "authenticity", *(header for _key, header in own)]
    rows = []
    for c in status["conditions"]:
        rows.append(
            [
                c["name"] + (" *" if c["is_baseline"] else ""),
                *(c["participants"][s] for s in STATUSES),
                c["flagged_for_exclusion"],
                c["authenticity_flagged"],
                *(status_cell(c, key) for key, _header in own),
            ]
        )
    unassigned = status["participants_without_condition"]
    if any(unassigned.values()):
        rows.append(["(no condition)", *(unassigned[s] for s in STATUSES), "", "", *([""] * len(own))])
    totals = status["totals"]
    rows.append(
        [
            "total",
            *(totals["participants"][s] for s in STATUSES),
            totals["flagged_for_exclusion"],
            totals["authenticity_flagged"],
            *(status_cell(totals, key) if key in totals else "" for key, _header in own),
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
        " authenticity: flagged by the authenticity score and not cleared in review; staff previews are never counted"
    )
    lines += [f"shortfall: {text}" for text in status.get("notices", [])]
    return "\n".join(lines)


class Command(StudyCommand):
    help = "Per condition: responses, participants by status, ratings and the spread of ratings per response."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print JSON instead of a table."
        )

    def handle_study(self, study, *, as_json=False, **options):
        status = study_status(study=study)
        self.stdout.write(json.dumps(status, indent=2) if as_json else render_table(status))
