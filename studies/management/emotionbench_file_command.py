"""The command that loads one EmotionBench JSON file, all or nothing (import_instruments, import_situations)."""

from collections.abc import Callable
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from studies.emotionbench.data import EmotionBenchImportError


class EmotionBenchFileCommand(BaseCommand):
    """Subclasses name what they load (`what`), the file (`file_help`) and the importer (`load(path=...)`)."""

    what = ""
    file_help = ""
    load: Callable  # the importer, `staticmethod(importer)`: load(path=...) -> its summary

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help=self.file_help)

    def handle(self, *args, path: Path, **options):
        try:
            summary = self.load(path=path)
        except EmotionBenchImportError as exc:
            raise CommandError(f"nothing imported: {exc}") from exc
        self.stdout.write(f"{self.what}: " + "\n".join(summary.lines()))
