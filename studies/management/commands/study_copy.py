"""python manage.py study_copy <source> <new-slug> [--title TITLE]

A new draft with the source's design: texts, questionnaire and kind settings, scale, checks, codes, conditions
with their LLM configurations, prompts and imported responses (generated ones are generated again)."""

from django.core.management.base import CommandError

from studies.management.study_command import StudyCommand
from studies.waves import StudyCopyError, study_copy


class Command(StudyCommand):
    slug_help = "The study to copy."
    help = "Copy a study into a new draft with the same design."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("new_slug")
        parser.add_argument("--title", default="")

    def handle_study(self, study, *, new_slug, title, **options):
        try:
            copy = study_copy(source=study, new_slug=new_slug, title=title)
        except StudyCopyError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"copied '{study.slug}' to draft '{copy.slug}': {copy.conditions.count()} conditions, "
            f"{copy.prompts.count()} prompts, {copy.attention_checks.count()} attention checks"
        )
