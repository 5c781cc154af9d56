"""python manage.py export <study-slug> --what ratings|participants|responses --out FILE (or - for stdout)."""

import os
import sys
import tempfile
from pathlib import Path

from django.core.management.base import CommandError

from analysis import exports
from analysis.design import design_json_write, design_lines, design_of
from analysis.exclusions import ExclusionRules
from studies.management.study_command import StudyCommand


class Command(StudyCommand):
    help = (
        "Stream one export of a study as CSV: ratings (long format, with exclusion flags), participants, or "
        "responses. Memory stays bounded whatever the study's size. Formula-like cells are neutralised."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument(
            "--what",
            required=True,
            help=f"{', '.join(exports.EXPORT_KINDS)}, or one of the study's kind's further exports (e.g. transcript)",
        )
        parser.add_argument("--out", required=True, help="File to write, or - for standard output.")
        parser.add_argument(
            "--no-exclusions",
            action="store_true",
            help="Compute the ratings' exclusion flags with no rule on (default: the study's declared rules).",
        )

    def handle_study(self, study, *, what, out, no_exclusions, **options):
        rules = ExclusionRules.none() if no_exclusions else None  # None: the study's declared rules
        if what not in exports.export_names(study):
            raise CommandError(f"no export {what!r}: choose one of {', '.join(exports.export_names(study))}")
        lines = exports.export_lines(study=study, what=what, rules=rules)
        if out == "-":
            for line in lines:
                sys.stdout.write(line)
            sys.stdout.flush()
            for line in design_lines(design_of(study)):
                self.stderr.write(line)
            return
        target = Path(out)
        # Write beside the target and rename at the end: a failed export never leaves half a file behind.
        fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".", suffix=".partial")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                for piece in lines:
                    fh.write(piece)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.stderr.write(f"{study.slug}: {lines.rows} {what} rows written to {target}")
        design = design_of(study)
        sidecar = design_json_write(design, target.with_name(target.name + ".design.json"))
        for line in [*design_lines(design), f"design written to {sidecar}"]:
            self.stderr.write(line)
