from pathlib import Path

from django.core.management.base import CommandError

from studies.kinds import NoQuestionnaire, questionnaire_with_instrument
from studies.management.study_command import StudyCommand

from ...analysis import emotionbench_analyse
from ...report import emotionbench_report_text


class Command(StudyCommand):
    help = (
        "EmotionBench analysis of a questionnaire study: default PA/NA and their change per emotion, humans "
        "beside models, with the paper's tests; optionally every group as CSV."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument(
            "--alpha", type=float, default=None, help="Significance level (default: the study's)."
        )
        parser.add_argument(
            "--csv", type=Path, default=None, help="Write every group and test to this CSV file."
        )

    def handle_study(self, study, *, alpha: float | None, csv: Path | None, **options):
        try:
            questionnaire_with_instrument(study)
        except NoQuestionnaire as exc:
            raise CommandError(str(exc)) from None
        if alpha is not None and not 0 < alpha < 1:
            raise CommandError("--alpha must be between 0 and 1")
        analysis = emotionbench_analyse(study=study, alpha=alpha)
        self.stdout.write(emotionbench_report_text(analysis=analysis))
        if csv is not None:
            analysis.frame().to_csv(csv, index=False)
            self.stdout.write(f"\nwrote {csv}")
