"""The base of the commands about one study, named by its slug as their first argument (analyze, export,
study_status, study_copy, ...): the argument and the study's lookup, written once."""

from abc import ABC, abstractmethod

from django.core.management.base import BaseCommand, CommandError

from studies.models import Study


class StudyCommand(BaseCommand, ABC):
    """Subclasses add their own arguments after the study's slug (`super().add_arguments(parser)` first) and
    implement `handle_study(study, **options)` (a subclass without it cannot be made: the command is refused
    before it runs). A slug no study has is a CommandError naming it; nothing runs.
    `study_related`: what the lookup selects with the study (select_related), for a command that reads it."""

    slug_help = "The study's slug."
    study_related: tuple[str, ...] = ()

    def add_arguments(self, parser):
        parser.add_argument("study_slug", help=self.slug_help)

    def handle(self, *args, study_slug: str, **options):
        study = Study.objects.filter(slug=study_slug).select_related(*self.study_related).first()
        if study is None:
            raise CommandError(f"no study with slug {study_slug!r}")
        return self.handle_study(study, **options)

    @abstractmethod
    def handle_study(self, study: Study, **options):
        """What the command does with its study; returns what `handle` returns (output to print, or None)."""
