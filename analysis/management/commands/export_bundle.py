"""python manage.py export_bundle <study-slug> [--wave N] --out DIR: the study's open-science bundle
(analysis/bundle.py)."""

from pathlib import Path

from django.core.management.base import CommandError

from analysis.bundle import DEFAULT_LICENCE, BundleError, BundleOptions, bundle_study, bundle_write
from analysis.bundle_metadata import LICENCE_URLS
from studies.management.study_command import StudyCommand


class Command(StudyCommand):
    help = (
        "Write a study's open-science bundle into a new directory: Psych-DS, Frictionless and Croissant metadata, "
        "the data under pseudonyms, materials, the pre-registration and design, an analysis script that re-runs "
        "the headline figures from the bundle alone, its results and a SHA-256 manifest."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--wave", type=int, help="The family's wave number N (1: the first wave).")
        parser.add_argument("--out", required=True, help="The directory to create (must not exist).")
        parser.add_argument(
            "--include-free-text",
            action="store_true",
            help="Include what participants wrote in their own words (left out by default).",
        )
        parser.add_argument(
            "--license",
            default=DEFAULT_LICENCE,
            choices=sorted(LICENCE_URLS),
            help=f"The data's licence, an SPDX id (default {DEFAULT_LICENCE}).",
        )
        parser.add_argument("--author", action="append", default=[], help="An author (repeat for several).")
        parser.add_argument("--url", default="", help="Where the bundle will be published.")

    def handle_study(self, study, *, wave, out, include_free_text, license, author, url, **options):
        bundle_options = BundleOptions(
            include_free_text=include_free_text, licence=license, authors=tuple(author), url=url
        )
        try:
            study = bundle_study(study, wave)
            names = bundle_write(study, Path(out), bundle_options)
        except BundleError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{study.slug}: {len(names)} files in {out}")
        self.stdout.write(f"check: cd {out} && sha256sum -c MANIFEST.sha256")
