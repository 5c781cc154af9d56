"""python manage.py analyze <study-slug> --out DIR: CSV tables, PNG and SVG figures and a self-contained report."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from analysis import selectors, stats
from analysis.services import DEFAULT_BOOTSTRAP_SAMPLES, AnalysisError, AnalysisOptions, analysis_entry
from studies.models import Study


class Command(BaseCommand):
    help = (
        "Analyse a study and write every table as CSV, every figure as PNG and SVG, and report.html (figures "
        "embedded) into DIR. Exclusion rules are declared by the options below and listed in the report."
    )

    def add_arguments(self, parser):
        parser.add_argument("study_slug")
        parser.add_argument("--out", required=True, help="Directory to write into (created if missing).")
        parser.add_argument(
            "--baseline",
            default=None,
            help="Condition to compare against (default: the condition marked as baseline, else 'human').",
        )
        parser.add_argument(
            "--bootstrap",
            type=int,
            default=DEFAULT_BOOTSTRAP_SAMPLES,
            help="Bootstrap resamples of participants (default %(default)s).",
        )
        parser.add_argument(
            "--seed", type=int, default=None, help="Bootstrap seed (default: the study's seed)."
        )
        parser.add_argument("--no-exclusions", action="store_true", help="Apply no exclusion rule.")
        parser.add_argument(
            "--min-median-ms",
            type=float,
            default=stats.ExclusionRules.min_median_response_ms,
            help="Too-fast rule: exclude participants whose median response time is below this "
            "(default %(default)s; 0 turns the rule off).",
        )
        parser.add_argument(
            "--straight-lining-min-items",
            type=int,
            default=stats.ExclusionRules.straight_lining_min_items,
            help="Straight-lining rule: exclude participants giving one value to all of at least "
            "this many items (default %(default)s; 0 turns the rule off).",
        )
        parser.add_argument(
            "--keep-flagged",
            action="store_true",
            help="Keep participants flagged for failed attention checks.",
        )

    def handle(self, *args, study_slug, out, baseline, bootstrap, seed, **opts):
        try:
            study = selectors.study_get_by_slug(slug=study_slug)
        except Study.DoesNotExist:
            raise CommandError(f"no study with slug {study_slug!r}") from None
        if bootstrap < 1:
            raise CommandError("--bootstrap must be at least 1")
        if opts["no_exclusions"]:
            rules = stats.ExclusionRules.none()
        else:
            rules = stats.ExclusionRules(
                attention_checks=not opts["keep_flagged"],
                min_median_response_ms=opts["min_median_ms"] or None,
                straight_lining_min_items=opts["straight_lining_min_items"] or None,
            )
        options = AnalysisOptions(rules=rules, baseline=baseline, bootstrap_samples=bootstrap, seed=seed)
        try:
            # The study kind's analysis entry (analysis/entries.py) writes its tables, figures and report.
            lines = analysis_entry(study=study).report_write(study, options, Path(out))
        except AnalysisError as exc:
            raise CommandError(str(exc)) from None
        for line in lines:
            (self.stderr if line.startswith("note: ") else self.stdout).write(line)
