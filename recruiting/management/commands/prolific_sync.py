"""python manage.py prolific_sync <slug>: read every page of the study's submissions on Prolific and repair
what a lost webhook left (the beat job does the same every few minutes)."""

import json

from django.core.management.base import BaseCommand, CommandError

from recruiting.client import ProlificError
from recruiting.models import ProlificStudy
from recruiting.submissions import submissions_reconcile


class Command(BaseCommand):
    help = "Reconcile a study's participants with its submissions on Prolific (all pages)."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args, slug, **options):
        link = ProlificStudy.objects.select_related("study").filter(study__slug=slug).first()
        if link is None:
            raise CommandError(
                f"Study {slug!r} is not linked to Prolific (add it under Recruiting in the admin)."
            )
        if not link.prolific_study_id:
            raise CommandError(f"Study {slug!r} has not been created on Prolific yet.")
        try:
            report = submissions_reconcile(link=link)
        except ProlificError as exc:
            raise CommandError(f"Prolific: {exc}") from exc
        if options["json"]:
            self.stdout.write(json.dumps(report.__dict__))
            return
        self.stdout.write(
            f"{slug}: {report.seen} submissions read, {report.changed} changed, {report.freed} places freed, "
            f"{report.approved} approved."
        )
        if report.missing_on_prolific:
            self.stdout.write(
                f"Completed here but missing on Prolific ({len(report.missing_on_prolific)}): "
                + ", ".join(report.missing_on_prolific)
            )
