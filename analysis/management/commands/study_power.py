"""python manage.py study_power <slug> [--json]: participants per condition the planned tests need."""

import json

from django.core.management.base import CommandError

from analysis import power
from analysis.study_power import StudyPowerError, study_power_plan
from studies.management.study_command import StudyCommand


def _shares(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise CommandError(f"shares must be comma-separated numbers, got {text!r}") from None


class Command(StudyCommand):
    help = (
        "Participants per condition for 80% and 90% power of the planned tests (2×3 chi-square and 2×2 "
        "Good-vs-rest with Yates' correction, each condition against the baseline, Holm over conditions planned "
        "at the Bonferroni level). Expected shares: the baseline's observed ones where the study has ratings, "
        "otherwise the seed study's published shares; override with the options below. A pairwise study: pairs "
        "and participants to tell each condition's win rate against the baseline from 50 % (shares: baseline "
        "preferred, about the same, condition preferred)."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")
        parser.add_argument(
            "--alpha", type=float, default=None, help=f"Family α (default {power.DEFAULT_ALPHA})."
        )
        parser.add_argument("--power", default="0.8,0.9", help="Target powers (default %(default)s).")
        parser.add_argument(
            "--items", type=int, default=None, help="Items per participant (default: the study's)."
        )
        parser.add_argument(
            "--design-effect",
            type=float,
            default=None,
            help="Variance inflation for ratings clustered in participants, 1 + (items − 1)·ICC (default: from "
            "the ICC).",
        )
        parser.add_argument(
            "--icc",
            type=float,
            default=None,
            help="Within-participant ICC of the top rating (default: estimated from the baseline's ratings, "
            "else the seed study's largest).",
        )
        parser.add_argument(
            "--shares",
            action="append",
            default=[],
            metavar="CONDITION=B,O,G",
            help="Expected shares of one condition, ascending scale (repeatable); pairwise: baseline preferred, "
            "about the same, condition preferred.",
        )
        parser.add_argument(
            "--alternative-shares", metavar="B,O,G", help="Expected shares of every non-baseline condition."
        )
        parser.add_argument(
            "--judge-correlation", type=float, help="A calibrated judge's correlation with people."
        )
        parser.add_argument(
            "--judge-ratio", type=float, help="Judge ratings per human rating under PPI (default: unlimited)."
        )

    def handle_study(self, study, **opts):
        shares = {}
        for item in opts["shares"]:
            name, sep, values = item.partition("=")
            if not sep:
                raise CommandError(f"--shares takes CONDITION=B,O,G, got {item!r}")
            shares[name] = _shares(values)
        try:
            plan = study_power_plan(
                study=study,
                alpha=opts["alpha"],
                powers=_shares(opts["power"]),
                items_per_participant=opts["items"],
                design_effect=opts["design_effect"],
                icc=opts["icc"],
                shares=shares,
                alternative_shares=_shares(opts["alternative_shares"])
                if opts["alternative_shares"]
                else None,
                judge_correlation=opts["judge_correlation"],
                judge_ratio=opts["judge_ratio"],
            )
        except (StudyPowerError, power.PowerError) as exc:
            raise CommandError(str(exc)) from None
        if opts["json"]:
            self.stdout.write(json.dumps(plan.as_dict(), allow_nan=False))
            return
        self._text(plan)

    def _text(self, plan):
        out = self.stdout
        out.write(
            f"Study {plan.study}: baseline {plan.baseline}, α {plan.alpha:g} over {plan.comparisons} "
            f"comparison(s), first Holm step at α {plan.alpha / max(plan.comparisons, 1):.4g}; "
            f"{plan.items_per_participant} items per participant, {plan.design_effect_text}"
        )
        for name, shares in plan.shares.items():
            listed = ", ".join(f"{label} {s:.3f}" for label, s in zip(plan.scale, shares, strict=True))
            out.write(f"  expected {name}: {listed}  [{plan.share_sources[name]}]")
        ppi = plan.judge_correlation is not None
        header = f"{'condition':<20} {'test':<48} {'power':>5} {'ratings':>8} {'participants':>12}"
        out.write(header + (f" {'PPI ratings':>11} {'PPI people':>10}" if ppi else ""))
        for line in plan.lines:
            text = (
                f"{line.condition:<20} {line.test:<48} {line.power:>5.2f} {_n(line.ratings_per_condition):>8} "
                f"{_n(line.participants_per_condition):>12}"
            )
            if ppi:
                text += (
                    f" {_n(line.ppi_ratings_per_condition):>11} {_n(line.ppi_participants_per_condition):>10}"
                )
            out.write(text)


def _n(value) -> str:
    return "∞" if value is None else str(value)
