"""python manage.py tallies_rebuild: counts every response's pages again into its tally (ResponseTally)."""

from django.core.management.base import BaseCommand

from studies.balancing import response_tallies_rebuild


class Command(BaseCommand):
    help = (
        "Counts every response's live pages again into ResponseTally, which enrolment deals by: the repair after "
        "anything that bypassed the assignments table's triggers (a TRUNCATE, a restore without triggers). Safe "
        "while studies run."
    )

    def handle(self, *args, **options):
        wrong, responses = response_tallies_rebuild()
        self.stdout.write(f"{responses} responses with pages; {wrong} tallies were wrong and are now right.")
