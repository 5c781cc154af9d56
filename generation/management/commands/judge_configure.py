"""Create or change a study's LLM judge, and show what it would send for the study's first response.

    python manage.py judge_configure <study-slug> <judge-name> --provider NAME --model MODEL
        [--rubric-file FILE] [--system-prompt TEXT] [--samples N] [--temperature T] [--max-tokens N] [--seed S]
        [--screens-new-conditions | --no-screens-new-conditions]

Without --rubric-file a new judge gets the default rubric (the seed study's Good / Okay / Bad definitions). The
judge is validated as the admin validates it (a rubric placeholder a response does not have is refused, naming
it) and nothing is sent. Then run it with `judge_run`.
"""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from generation.judge_models import Judge
from generation.models import Provider
from generation.services import judging
from studies.models import Study


class Command(BaseCommand):
    help = "Create or change an LLM judge of a study (rubric, provider, model, samples, screening)."

    def add_arguments(self, parser):
        parser.add_argument("study")
        parser.add_argument("judge", help="The judge's name (a slug, unique within the study).")
        parser.add_argument("--provider", help="The provider's name (a generation Provider).")
        parser.add_argument("--model")
        parser.add_argument("--rubric-file", help="A text file holding the rubric prompt.")
        parser.add_argument("--system-prompt")
        parser.add_argument("--samples", type=int, dest="n_samples")
        parser.add_argument("--temperature", type=float)
        parser.add_argument("--max-tokens", type=int, dest="max_tokens")
        parser.add_argument("--seed", type=int)
        parser.add_argument(
            "--screens-new-conditions", action="store_true", default=None, dest="screens_new_conditions"
        )
        parser.add_argument(
            "--no-screens-new-conditions", action="store_false", dest="screens_new_conditions"
        )

    def handle(self, *args, **options):
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f"No study with slug {options['study']!r}.")
        judge = Judge.objects.filter(study=study, name=options["judge"]).first() or Judge(
            study=study, name=options["judge"]
        )
        created = judge.pk is None
        if options["provider"]:
            judge.provider = Provider.objects.filter(name=options["provider"]).first()
            if judge.provider is None:
                names = ", ".join(Provider.objects.values_list("name", flat=True)) or "none"
                raise CommandError(f"No provider named {options['provider']!r} (there are: {names}).")
        elif created:
            raise CommandError("A new judge needs --provider and --model.")
        if options["rubric_file"]:
            with open(options["rubric_file"], encoding="utf-8") as handle:
                judge.rubric = handle.read()
        for name in (
            "model",
            "system_prompt",
            "n_samples",
            "temperature",
            "max_tokens",
            "seed",
            "screens_new_conditions",
        ):
            if options[name] is not None:
                setattr(judge, name, options[name])
        try:
            judge.full_clean()
        except ValidationError as exc:
            problems = "; ".join(
                f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items()
            )
            raise CommandError(f"The judge was not saved: {problems}") from None
        judge.save()
        self.stdout.write(
            f"{'Created' if created else 'Updated'} judge {judge.name} of {study.slug}: {judge.provider.name}/"
            f"{judge.model}, {judge.n_samples} sample(s) per response, temperature {judge.temperature}, "
            f"screens new conditions: {'yes' if judge.screens_new_conditions else 'no'}."
        )
        example = judging.judge_example(judge=judge)
        if example is not None:
            system, messages = example
            self.stdout.write("What it sends for the study's first response or pair (nothing was sent):")
            if system:
                self.stdout.write(f"  system: {system}")
            self.stdout.write("  user:\n    " + messages[0]["content"].replace("\n", "\n    "))
        for problem in judging.judge_problems(judge=judge):
            self.stdout.write(self.style.WARNING(problem))
