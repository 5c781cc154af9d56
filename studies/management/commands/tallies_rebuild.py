"""python manage.py tallies_rebuild: counts every response's pages again into its tally (ResponseTally), and on
PostgreSQL every condition's completed participants into theirs (ConditionTally)."""

from django.core.management.base import BaseCommand

from studies.balancing import condition_tallies_rebuild, response_tallies_rebuild


class Command(BaseCommand):
    help = (
        "Counts every response's live pages again into ResponseTally (a row for every response, with whether it "
        "may be dealt), which enrolment deals by, and (PostgreSQL) "
        "every condition's completed participants into ConditionTally, which it counts by: the repair after "
        "anything that bypassed the tables' triggers (a TRUNCATE, a restore without triggers). Safe while "
        "studies run."
    )

    def handle(self, *args, **options):
        wrong, responses = response_tallies_rebuild()
        self.stdout.write(f"{responses} responses tallied; {wrong} tallies were wrong and are now right.")
        wrong, conditions = condition_tallies_rebuild()
        self.stdout.write(
            f"{conditions} conditions with completed participants; {wrong} tallies were wrong and are now right."
        )
