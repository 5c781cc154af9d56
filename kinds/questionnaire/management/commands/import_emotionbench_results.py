from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from studies.emotionbench.data import EmotionBenchImportError

from ...results import challenging_results_import, published_results_import


class Command(BaseCommand):
    help = (
        "Load EmotionBench's published PANAS answers (results/PANAS Test/*-PANAS-testing.csv, one condition per "
        "model, and crowd.xlsx sheet Raw as condition 'human') into a questionnaire study, created if new."
    )

    def add_arguments(self, parser):
        parser.add_argument("study_slug")
        parser.add_argument(
            "folder", type=Path, help="The EmotionBench data folder (or its 'PANAS Test' folder)."
        )
        parser.add_argument("--title", default="EmotionBench published results", help="Title of a new study.")
        parser.add_argument(
            "--challenging",
            action="store_true",
            help="Instead: load results/Challenging Bench/*-<instrument>-testing.csv, one study per instrument "
            "named <study_slug>-<instrument> (the instruments must be imported).",
        )

    def handle(self, *args, study_slug: str, folder: Path, title: str, challenging: bool, **options):
        try:
            if challenging:
                summaries = challenging_results_import(study_slug=study_slug, folder=folder)
            else:
                summaries = [published_results_import(study_slug=study_slug, folder=folder, title=title)]
        except EmotionBenchImportError as exc:
            raise CommandError(f"nothing imported: {exc}") from exc
        for summary in summaries:
            self.stdout.write("\n".join(summary.lines()))
