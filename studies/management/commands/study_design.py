"""python manage.py study_design <slug> [--out FILE] [--prereg]

Prints (or writes to FILE) the study's frozen design as canonical JSON, with its SHA-256 on stderr; a draft's
design is the one launch would freeze (said so). --prereg: the pre-registration document in Markdown."""

from pathlib import Path

from studies.design import canonical_json, design_build, design_current, text_sha256
from studies.management.study_command import StudyCommand
from studies.prereg import prereg_markdown


class Command(StudyCommand):
    help = (
        "Print or write a study's frozen design (canonical JSON) with its SHA-256, or its pre-registration."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--out", help="Write to this file instead of printing.")
        parser.add_argument("--prereg", action="store_true", help="The pre-registration document (Markdown).")

    def handle_study(self, study, *, out=None, prereg=False, **options):
        current = design_current(study)
        if prereg:
            text = prereg_markdown(study)
        else:
            text = current.canonical if current is not None else canonical_json(design_build(study))
        sha = current.sha256 if current is not None else text_sha256(canonical_json(design_build(study)))
        state = (
            "frozen" if current is not None else "NOT frozen yet (draft: this is what launch would freeze)"
        )
        if out:
            Path(out).write_text(text if prereg else text + "\n", encoding="utf-8")
            self.stderr.write(f"wrote {out}")
        else:
            self.stdout.write(text)
        self.stderr.write(f"design sha256 {sha} ({state})")
