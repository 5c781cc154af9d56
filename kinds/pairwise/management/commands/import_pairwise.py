"""python manage.py import_pairwise <study-slug> <corpus.csv> <votes.csv>: published pairwise votes as a closed
pairwise study."""

from django.core.management.base import BaseCommand, CommandError

from studies.importers import CorpusImportError
from studies.management.commands.import_corpus import read_file

from ...importer import pairwise_import


class Command(BaseCommand):
    help = (
        "Load published pairwise votes as a new closed pairwise study, for re-analysis: the corpus (prompts and "
        "each condition's replies, as import_corpus reads it) and a votes CSV with the columns prompt, "
        "condition_a, condition_b, choice (a, b or tie), rater (and optionally both_inadequate). Nothing is "
        "written if any row is malformed."
    )

    def add_arguments(self, parser):
        parser.add_argument("study_slug")
        parser.add_argument("corpus")
        parser.add_argument("votes")
        parser.add_argument("--title", default="", help="The study's title.")
        parser.add_argument("--baseline", default="human", help="The baseline condition (default: human).")

    def handle(self, *args, study_slug, corpus, votes, title, baseline, **options):
        try:
            result = pairwise_import(
                study_slug=study_slug,
                corpus=read_file(corpus),
                votes=read_file(votes),
                title=title,
                baseline=baseline,
            )
        except CorpusImportError as exc:
            raise CommandError(f"{votes}: nothing was imported.\n{exc}") from None
        self.stdout.write(result.summary())
