"""python manage.py import_ratings <study-slug> <file>: published ratings as a closed study."""

from django.core.management.base import BaseCommand, CommandError

from kinds.rating.importer import ratings_import
from studies.importers import CorpusImportError
from studies.management.commands.import_corpus import TqdmProgress, read_file


class Command(BaseCommand):
    help = (
        "Load the public dataset of Welivita & Pu (dataset_and_ratings.csv: responses, ratings, raters and "
        "their TEQ answers) as a new closed study, for re-analysis. Nothing is written if any row is malformed."
    )

    def add_arguments(self, parser):
        parser.add_argument("study_slug")
        parser.add_argument("file")
        parser.add_argument("--title", default="", help="The study's title.")

    def handle(self, *args, study_slug, file, title, **options):
        data = read_file(file)
        progress = TqdmProgress()
        try:
            result = ratings_import(study_slug=study_slug, data=data, title=title, progress=progress)
        except CorpusImportError as exc:
            raise CommandError(f"{file}: nothing was imported.\n{exc}") from None
        finally:
            progress.close()
        self.stdout.write(result.summary())
