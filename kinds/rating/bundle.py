"""The rating kind's part of a study's open-science bundle (`StudyKind.bundle`, read by analysis/bundle.py): its
answers table (one row per counted rating, from the analysts' ratings export), its materials (the scale and the
question), and its headline analysis (each condition's distribution on the scale and its top share against the
baseline's), both as the platform computes it and as kinds/rating/bundle_script.py re-runs it from the
bundle's files alone."""

from __future__ import annotations

import math
from pathlib import Path

from analysis import selectors
from analysis.bundle_tables import Column, Table, exclusion_columns, project, pseudonymised, row_id_column
from analysis.exclusions import ExclusionRules
from analysis.services import AnalysisOptions, baseline_choose
from studies.models import Study

from .analysis import rating_study_analyze
from .export import rating_export_header, rating_export_records
from .kind import RATING

ANSWER_COLUMNS = [
    "participant", "condition", "response_id", "dialogue_id", "emotion", "valence", "position", "value",
    "value_label", "response_time_ms", "rated_at",
]  # fmt: skip
SCRIPT = Path(__file__).resolve().parent / "bundle_script.py"
REQUIREMENTS = "pandas==3.1.1\nnumpy==2.4.6\n"
# The headline (shares and their change) takes no bootstrap; the analysis it comes from runs a small one.
BOOTSTRAP_SAMPLES = 20


def _number(value) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value


class RatingBundle:
    """What a rating study's bundle holds of its own."""

    free_text = "none: a rating study's participants choose a point on the scale and write nothing"
    script = SCRIPT
    requirements = REQUIREMENTS
    extra_scripts: dict[str, Path] = {}

    def tables(self, study: Study, *, include_free_text: bool) -> list[Table]:
        rules = ExclusionRules.from_declared(study.exclusion_rules)
        header = rating_export_header()
        flags = [c.name for c in exclusion_columns()]
        records = pseudonymised(header, rating_export_records(study=study, rules=rules), study=study)
        scale = sorted(study.scale or [], key=lambda point: int(point["value"]))
        values = tuple(int(point["value"]) for point in scale)
        conditions = tuple(study.conditions.order_by("position", "name").values_list("name", flat=True))
        columns = [
            row_id_column("rating"),
            Column("participant", "string", "The rater's pseudonym (participants' participant).", True),
            Column("condition", "string", "The condition whose reply was rated.", True, enum=conditions or None),
            Column("response_id", "integer", "The reply rated (items' response_id).", True),
            Column("dialogue_id", "string", "The prompt's id in its corpus.", True),
            Column("emotion", "string", "The emotion the speaker felt.", True),
            Column("valence", "string", "The emotion's valence group."),
            Column("position", "integer", "The page's place in the rater's sequence (1-based).", True, minimum=0),
            Column("value", "integer", f"The rating: {RATING.settings(study).scale_question}", True, enum=values or None,
                   minimum=min(values, default=None), maximum=max(values, default=None)),
            Column("value_label", "string", "The scale's word for the value.",
                   enum=tuple(str(point.get("label", point["value"])) for point in scale) or None),
            Column("response_time_ms", "integer", "Time on the page, in milliseconds.", minimum=0),
            Column("rated_at", "datetime", "When the rating was given (UTC).", True),
            *exclusion_columns(),
        ]  # fmt: skip
        answers = Table(
            key="answers",
            title="Ratings",
            description="One row per counted rating (attention-check pages and staff previews left out), with "
            "the exclusion flags the study's declared rules give.",
            columns=columns,
            rows=project(header, records, ANSWER_COLUMNS + flags),
            foreign_keys=[
                (["participant"], "participants", ["participant"]),
                (["response_id"], "items", ["response_id"]),
            ],
        )
        return [answers]

    def materials(self, study: Study) -> dict[str, object]:
        return {"scale": {"question": RATING.settings(study).scale_question, "scale": study.scale}}

    def prereg_answers(self, study: Study) -> dict[str, str]:
        """The pre-registration's answers only this kind gives (studies.prereg.prereg_osf)."""
        scale = ", ".join(f"{p.get('label', p['value'])} = {p['value']}" for p in study.scale or [])
        settings = RATING.settings(study)
        return {
            "Measured variables": f"Each rating of a reply: {settings.scale_question} Scale: {scale}. "
            f"{settings.target_ratings_per_response} ratings per reply aimed for.",
        }

    def parameters(self, study: Study) -> dict:
        infos = selectors.condition_list(study=study)
        return {
            "conditions": [c.name for c in infos],
            "baseline": baseline_choose(conditions=infos, requested=None),
            "scale": [
                {"value": int(p["value"]), "label": str(p.get("label", p["value"]))}
                for p in sorted(study.scale, key=lambda point: int(point["value"]))
            ],
        }

    def results(self, study: Study) -> dict:
        """The headline as the platform's analysis computes it (analysis.py, the dashboard's numbers)."""
        analysis = rating_study_analyze(
            study=study, options=AnalysisOptions(bootstrap_samples=BOOTSTRAP_SAMPLES)
        )
        distribution = [
            {key: (_number(v) if key.startswith("pct_") or key == "mean" else v) for key, v in row.items()}
            for row in analysis.distribution.to_dict(orient="records")
        ]
        for row in distribution:
            for key, value in row.items():
                if key in ("participants", "ratings") or key.startswith("n_"):
                    row[key] = int(value)
        change = [
            {
                "condition": row["condition"],
                "baseline": row["baseline"],
                "top_share": _number(row["top_share"]),
                "top_share_baseline": _number(row["top_share_baseline"]),
                "change": _number(row["change"]),
            }
            for row in analysis.change.to_dict(orient="records")
        ]
        return {
            "ratings_analysed": int(analysis.n_rows),
            "ratings": int(analysis.n_rows_before),
            "distribution": distribution,
            "change": change,
        }


RATING_BUNDLE = RatingBundle()
