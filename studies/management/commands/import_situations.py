from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from studies.emotionbench.data import EmotionBenchImportError
from studies.emotionbench.instruments import situations_import


class Command(BaseCommand):
    help = "Import the EmotionBench situation pool (situations.json: emotions → factors → situations), all or nothing."

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="A situations.json file.")

    def handle(self, *args, path: Path, **options):
        try:
            summary = situations_import(path=path)
        except EmotionBenchImportError as exc:
            raise CommandError(f"nothing imported: {exc}") from exc
        self.stdout.write("situations: " + "\n".join(summary.lines()))
