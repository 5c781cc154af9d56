from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from studies.emotionbench.data import EmotionBenchImportError
from studies.emotionbench.instruments import instruments_import


class Command(BaseCommand):
    help = "Import questionnaires (e.g. EmotionBench's questionnaires.json: PANAS and eight scales), all or nothing."

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="A questionnaires.json file.")

    def handle(self, *args, path: Path, **options):
        try:
            summary = instruments_import(path=path)
        except EmotionBenchImportError as exc:
            raise CommandError(f"nothing imported: {exc}") from exc
        self.stdout.write("instruments: " + "\n".join(summary.lines()))
