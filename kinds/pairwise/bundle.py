"""The pairwise kind's part of a study's open-science bundle (`StudyKind.bundle`, read by analysis/bundle.py): its
answers table (one row per answered regular pair, from the kind's answers export, analysis/pairwise_frame.py),
its materials (the question and the choices), and its headline analysis (the conditions' Bradley–Terry strengths
with ties, the baseline at 0, and their two-way bootstrap intervals under the study's seed), both as the platform
computes it (kinds/pairwise/report.py) and as kinds/pairwise/bundle_script.py re-runs it from the bundle's
files alone, with the platform's own model code copied beside it."""

from __future__ import annotations

import math
from pathlib import Path

from analysis.bundle_tables import Column, Table, exclusion_columns, project, pseudonymised, row_id_column
from analysis.exclusions import ExclusionRules
from analysis.services import DEFAULT_BOOTSTRAP_SAMPLES, AnalysisOptions
from kinds.pairwise import bradley_terry_bootstrap, bradley_terry_fit
from kinds.pairwise.analysis import baseline_of
from kinds.pairwise.bradley_terry_fit import BradleyTerryError
from kinds.pairwise.frame import FRAME_TYPES, pairwise_export, pairwise_frame
from kinds.pairwise.models import PairItem
from kinds.pairwise.report import pairwise_analyze_frame
from studies.models import Study

HERE = Path(__file__).resolve().parent
ANSWER_COLUMNS = [
    "participant", "prompt_id", "emotion", "left_condition", "right_condition", "choice", "both_inadequate",
    "response_time_ms", "left_length", "right_length", "position", "answered_at",
]  # fmt: skip
REQUIREMENTS = "numpy==2.4.6\npandas==3.1.1\nscipy==1.17.1\n"


def _number(value) -> float | None:
    value = float(value)
    return None if not math.isfinite(value) else value


class PairwiseBundle:
    """What a pairwise study's bundle holds of its own."""

    free_text = "none: a pairwise study's participants choose a reply (or a tie) and write nothing"
    script = HERE / "bundle_script.py"
    requirements = REQUIREMENTS
    # The platform's model code, pure numpy/scipy/pandas, copied as it is under analysis/lib/ by its module's
    # name (so its own imports hold): the script imports the modules parameters.json names.
    extra_scripts = {
        f"lib/{module.__name__.replace('.', '/')}.py": Path(module.__file__)
        for module in (bradley_terry_fit, bradley_terry_bootstrap)
    }

    def tables(self, study: Study, *, include_free_text: bool) -> list[Table]:
        header, records = pairwise_export(study, ExclusionRules.from_declared(study.exclusion_rules))
        flags = [c.name for c in exclusion_columns()]
        conditions = tuple(study.conditions.order_by("position", "name").values_list("name", flat=True))
        columns = [
            row_id_column("vote"),
            Column("participant", "string", "The rater's pseudonym (participants' participant).", True),
            Column("prompt_id", "string", "The prompt's id in its corpus (items' dialogue_id).", True),
            Column("emotion", "string", "The emotion the speaker felt.", True),
            Column("left_condition", "string", "The condition of the reply shown first (A).", True,
                   enum=conditions or None),
            Column("right_condition", "string", "The condition of the reply shown second (B).", True,
                   enum=conditions or None),
            Column("choice", "string", "The reply chosen as more empathetic, or a tie.", True,
                   enum=tuple(PairItem.Choice.values)),
            Column("both_inadequate", "boolean", "The rater ticked 'both replies are inadequate'.", True),
            Column("response_time_ms", "integer", "Time on the page, in milliseconds.", minimum=0),
            Column("left_length", "integer", "The first reply's length in characters.", True, minimum=0),
            Column("right_length", "integer", "The second reply's length in characters.", True, minimum=0),
            Column("position", "integer", "The page's place in the rater's sequence.", True, minimum=0),
            Column("answered_at", "datetime", "When the pair was answered (UTC).", True),
            *exclusion_columns(),
        ]  # fmt: skip
        answers = Table(
            key="answers",
            title="Votes",
            description="One row per answered regular pair (known-answer pairs are attention checks, not votes; "
            "staff previews left out), with the exclusion flags the study's declared rules give.",
            columns=columns,
            rows=project(header, pseudonymised(header, records, study=study), ANSWER_COLUMNS + flags),
            foreign_keys=[(["participant"], "participants", ["participant"])],
        )
        return [answers]

    def materials(self, study: Study) -> dict[str, object]:
        settings = study.pairwise_settings
        return {
            "choices": {
                "question": settings.question,
                "choices": [
                    {"value": value, "label": str(label)} for value, label in PairItem.Choice.choices
                ],
                "both_inadequate": "Both replies are inadequate (a box the rater may tick with any choice)",
            }
        }

    def prereg_answers(self, study: Study) -> dict[str, str]:
        """The pre-registration's answers only this kind gives (studies.prereg.prereg_osf)."""
        return {
            "Study type": "Experiment: each participant compares the conditions' replies to the same prompt, two at "
            "a time (within subjects), the sides randomised.",
            "Measured variables": f"Each pair's choice: {study.pairwise_settings.question} (the first reply, "
            "the second, or about the same), and whether both replies are inadequate.",
        }

    def parameters(self, study: Study) -> dict:
        return {
            "conditions": list(study.conditions.values_list("name", flat=True)),
            "baseline": baseline_of(study, AnalysisOptions()),
            "seed": int(study.seed),
            "bootstrap_samples": DEFAULT_BOOTSTRAP_SAMPLES,
            "modules": {"fit": bradley_terry_fit.__name__, "bootstrap": bradley_terry_bootstrap.__name__},
            "frame_types": {column: kind.__name__ for column, kind in FRAME_TYPES.items()},
        }

    def results(self, study: Study) -> dict:
        """The headline as the platform's pairwise analysis computes it (kinds/pairwise/report.py) from the
        study's own counted votes."""
        frame = pairwise_frame(study=study)
        if frame.empty:
            return {"votes": 0, "strengths": [], "tie": None}
        parameters = self.parameters(study)
        try:
            result = pairwise_analyze_frame(
                frame,
                baseline=parameters["baseline"],
                seed=parameters["seed"],
                n_boot=parameters["bootstrap_samples"],
                conditions=parameters["conditions"],
            )
        except BradleyTerryError as exc:  # e.g. a condition without votes yet: no strengths, and why
            return {"votes": len(frame), "strengths": [], "tie": None, "note": str(exc)}
        scores = result["bt_scores"]
        terms = result["model_terms"]
        tie = terms[(terms["fit"] == "plain") & (terms["term"] == "tie")]["estimate"]
        return {
            "votes": int(result["summary"]["votes"]),
            "strengths": [
                {
                    key: (row[key] if key == "condition" else _number(row[key]))
                    for key in ("condition", "strength", "ci_low", "ci_high", "se")
                }
                for row in scores.to_dict(orient="records")
            ],  # fmt: skip
            "tie": _number(tie.iloc[0]) if len(tie) else None,
        }


PAIRWISE_BUNDLE = PairwiseBundle()
