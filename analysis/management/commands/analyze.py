"""python manage.py analyze <study-slug> --out DIR: CSV tables, PNG and SVG figures and a self-contained report."""

import dataclasses
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from analysis.exclusions import ExclusionRules
from analysis.services import DEFAULT_BOOTSTRAP_SAMPLES, AnalysisError, AnalysisOptions, analysis_entry
from studies.management.study_command import StudyCommand
from studies.models import Study


class Command(StudyCommand):
    help = (
        "Analyse a study and write every table as CSV, every figure as PNG and SVG, and report.html (figures "
        "embedded) and report.md into DIR. The exclusion rules are the study's declared ones unless the options "
        "below override them; the report lists both, tests whether exclusions differ between conditions and "
        "shows the headline with and without them."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
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
        parser.add_argument(
            "--no-exclusions",
            action="store_true",
            help="Apply no exclusion rule (not even the declared ones).",
        )
        # Each flag below overrides one of the study's declared rules for this analysis only; the report then says
        # the rules were overridden and lists the declared ones beside them.
        parser.add_argument(
            "--min-median-ms",
            type=float,
            default=None,
            help="Too-fast rule: exclude participants whose median response time is below this (0 turns the "
            "rule off; default: as declared).",
        )
        parser.add_argument(
            "--straight-lining-min-items",
            type=int,
            default=None,
            help="Straight-lining rule: exclude participants giving one value to all of at least this many items, "
            "when a wrong attention-check answer or a fast median time corroborates it (0 turns the rule off; "
            "default: as declared).",
        )
        parser.add_argument(
            "--straight-lining-corroborating-ms",
            type=float,
            default=None,
            help="Straight-lining rule: a median response time below this corroborates identical answers.",
        )
        parser.add_argument(
            "--straight-lining-identical-alone",
            action="store_true",
            help="Straight-lining rule: identical answers alone exclude (only sensible on scales of 5+ points).",
        )
        parser.add_argument(
            "--keep-flagged",
            action="store_true",
            help="Keep participants flagged for failed attention checks.",
        )
        parser.add_argument(
            "--keep-incomplete",
            action="store_true",
            help="Keep participants who did not complete (returned, timed out, never finished).",
        )

    def handle_study(self, study, *, out, baseline, bootstrap, seed, **opts):
        if bootstrap < 1:
            raise CommandError("--bootstrap must be at least 1")
        rules = self._rules(study, opts)
        options = AnalysisOptions(rules=rules, baseline=baseline, bootstrap_samples=bootstrap, seed=seed)
        try:
            # The study kind's analysis entry (kinds/rating/entry.py) writes its tables, figures and report.
            lines = analysis_entry(study=study).report_write(study, options, Path(out))
        except AnalysisError as exc:
            raise CommandError(str(exc)) from None
        for line in lines:
            self.stdout.write(line)

    def _rules(self, study: Study, opts: dict) -> ExclusionRules | None:
        """None (the study's declared rules), no rule, or the declared rules with the flags' overrides."""
        changes: dict = {}
        if opts["keep_flagged"]:
            changes["attention_checks"] = False
        if opts["keep_incomplete"]:
            changes["incomplete"] = False
        if opts["min_median_ms"] is not None:
            changes["min_median_response_ms"] = opts["min_median_ms"] or None
        if opts["straight_lining_min_items"] is not None:
            changes["straight_lining_min_items"] = opts["straight_lining_min_items"] or None
        if opts["straight_lining_corroborating_ms"] is not None:
            changes["straight_lining_corroborating_ms"] = opts["straight_lining_corroborating_ms"]
        if opts["straight_lining_identical_alone"]:
            changes["straight_lining_identical_alone"] = True
        if opts["no_exclusions"]:
            if changes:
                raise CommandError("--no-exclusions cannot be combined with flags that change one rule")
            return ExclusionRules.none()
        if not changes:
            return None
        try:
            declared = ExclusionRules.from_declared(study.exclusion_rules)
        except ValidationError as exc:
            raise CommandError(
                f"the study's declared exclusion rules are invalid: {'; '.join(exc.messages)}"
            ) from None
        return dataclasses.replace(declared, **changes)
