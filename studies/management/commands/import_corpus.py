"""python manage.py import_corpus <study-slug> <file> [--sample N --seed S] [--conditions a,b] [--replace]"""

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from studies.importers import CorpusImportError, corpus_import


class TqdmProgress:
    """Shows the import's stages, one tqdm bar at a time, on stderr (the summary goes to stdout)."""

    def __init__(self) -> None:
        self.stage: str | None = None
        self.bar: tqdm | None = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != self.stage:
            self.close()
            self.stage = stage
            self.bar = tqdm(total=total, desc=stage, unit=" rows", file=sys.stderr, leave=False)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def read_file(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None


def conditions_option(raw: str | None) -> list[str] | None:
    if raw is None:
        return None
    names = [name.strip() for name in raw.split(",") if name.strip()]
    if not names:
        raise CommandError("--conditions needs at least one name")
    return names


class Command(BaseCommand):
    help = (
        "Import prompts and responses into a draft study (created when the slug is new) from the public "
        "dataset format (response_<condition> columns) or a raw EmpatheticDialogues CSV. Nothing is written "
        "if any row is malformed."
    )

    def add_arguments(self, parser):
        parser.add_argument("study_slug")
        parser.add_argument("file")
        parser.add_argument("--sample", type=int, help="Import N prompts balanced over the emotions.")
        parser.add_argument("--seed", type=int, default=0, help="Seed of the sample (default 0).")
        parser.add_argument(
            "--conditions", help="Comma-separated response columns to import, e.g. human,chatgpt."
        )
        parser.add_argument(
            "--replace", action="store_true", help="Delete the draft study's prompts and responses first."
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Check the file and the import, then write nothing."
        )

    def handle(self, *args, study_slug, file, sample, seed, conditions, replace, dry_run, **options):
        data = read_file(file)
        progress = TqdmProgress()
        try:
            result = corpus_import(
                study_slug=study_slug,
                data=data,
                sample=sample,
                seed=seed,
                conditions=conditions_option(conditions),
                replace=replace,
                dry_run=dry_run,
                progress=progress,
            )
        except CorpusImportError as exc:
            raise CommandError(f"{file}: nothing was imported.\n{exc}") from None
        finally:
            progress.close()
        self.stdout.write(result.summary())
