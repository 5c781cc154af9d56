from django.core.management.base import CommandError

from generation.questionnaire import (
    QuestionnaireGenerationError,
    questionnaire_dispatch,
    questionnaire_generate,
    questionnaire_progress,
)
from studies.management.study_command import StudyCommand


class Command(StudyCommand):
    study_related = ("questionnaire_settings__instrument",)
    help = (
        "EmotionBench LLM subjects: each LLM condition of a questionnaire study answers the instrument "
        "(llm_default_runs default runs, llm_evoked_runs per selected situation, from its settings). Idempotent: "
        "stored runs are skipped, so re-running finishes what is missing."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--condition", default=None, help="Only this LLM condition.")
        parser.add_argument(
            "--max-asks", type=int, default=3, help="Asks per run before giving up on a reply."
        )
        parser.add_argument("--threads", type=int, default=4, help="Concurrent provider calls (default 4).")
        parser.add_argument("--progress", action="store_true", help="Only show progress and cost.")
        parser.add_argument(
            "--on-workers",
            action="store_true",
            help="Send the missing runs to the Celery workers and return (follow them with --progress); "
            "without a broker they run on background threads of this process.",
        )

    def handle_study(self, study, *, condition, max_asks, threads, progress, on_workers, **options):
        if not progress:
            if max_asks < 1:
                raise CommandError("--max-asks must be at least 1")
            try:
                if on_workers:
                    sent = questionnaire_dispatch(study=study, condition_name=condition, max_asks=max_asks)
                    self.stdout.write(f"{sent} runs sent to the workers")
                else:
                    summary = questionnaire_generate(
                        study=study, condition_name=condition, max_asks=max_asks, threads=max(1, threads)
                    )
                    self.stdout.write("\n".join(summary.lines()))
            except QuestionnaireGenerationError as exc:
                raise CommandError(str(exc)) from None
        for row in questionnaire_progress(study=study):
            self.stdout.write(
                f"{row['condition']}: {row['stored']}/{row['planned']} runs, {row['exchanges']} exchanges "
                f"({row['unparseable']} unparseable), cost {row['cost']:.6f}"
            )
