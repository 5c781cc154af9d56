"""python manage.py study_amend <slug> --field F --value JSON --reason TEXT --author NAME

Changes one frozen field of a launched study as a recorded amendment (old → new, who, when, why); the design
gets a new version and hash. VALUE is JSON (e.g. 250, "text", '[{"value": 3, "label": "Good"}]'); a value that
is not JSON is taken as a string."""

import json

from django.core.management.base import CommandError

from studies.design import AmendmentError, study_amend
from studies.management.study_command import StudyCommand


class Command(StudyCommand):
    help = "Amend one frozen field of a launched study (recorded, changes the design's hash)."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--field", required=True)
        parser.add_argument("--value", required=True, help="JSON, or a plain string.")
        parser.add_argument("--reason", required=True, help="Why the frozen design changes.")
        parser.add_argument("--author", required=True)

    def handle_study(self, study, *, field, value, reason, author, **options):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        try:
            amendment = study_amend(study=study, field=field, value=parsed, reason=reason, author=author)
        except AmendmentError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"amended {field} of '{study.slug}': {json.dumps(amendment.old_value)} → {json.dumps(amendment.new_value)}; "
            f"design {amendment.sha256_before[:12]} → {amendment.sha256_after}"
        )
