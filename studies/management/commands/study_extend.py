"""python manage.py study_extend <parent> <new-slug> --condition NAME [--condition NAME ...]
[--rerate-share 0.1] [--like PARENT_LLM_CONDITION] [--title TITLE]

A follow-up wave of a launched (or imported) study: the same prompts, the new LLM conditions, and a re-rating
of the parent's baseline by a share of its number of raters (rater drift). Then: configure the new conditions'
models (admin, or --like), generate_responses <new-slug>, launch, and analyze <new-slug>."""

from django.core.management.base import CommandError

from studies.management.study_command import StudyCommand
from studies.waves import DEFAULT_RERATE_SHARE, StudyCopyError, study_extend


class Command(StudyCommand):
    slug_help = "The study to extend (the family's first)."
    help = "Create a follow-up wave of a study: new LLM conditions compared with its stored human baseline."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("new_slug")
        parser.add_argument("--condition", action="append", required=True, dest="conditions")
        parser.add_argument("--rerate-share", type=float, default=DEFAULT_RERATE_SHARE)
        parser.add_argument(
            "--like", default=None, help="A parent LLM condition whose configuration to start from."
        )
        parser.add_argument("--title", default="")

    def handle_study(self, study, *, new_slug, conditions, rerate_share, like, title, **options):
        try:
            wave = study_extend(
                parent=study, new_slug=new_slug, conditions=conditions, rerate_share=rerate_share, like=like,
                title=title,
            )  # fmt: skip
        except StudyCopyError as exc:
            raise CommandError(str(exc)) from None
        lines = [f"wave '{wave.slug}' of '{study.slug}' (draft):"]
        for c in wave.conditions.order_by("position"):
            lines.append(f"  {c.name}: {c.kind}, quota {c.effective_quota}, {c.responses.count()} responses")
        lines.append(
            f"next: configure the models, generate_responses {wave.slug}, launch, analyze {wave.slug}"
        )
        self.stdout.write("\n".join(lines))
