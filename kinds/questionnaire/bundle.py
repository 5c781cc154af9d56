"""The questionnaire kind's part of a study's open-science bundle (`StudyKind.bundle`, read by analysis/bundle.py):
its answers table (one row per item answered in a questionnaire run, by a participant under a pseudonym or by a
model), its situations, its materials (the instrument: items, reverse scoring, categories, anchors), and its
headline analysis (each category's default and evoked mean, overall and per emotion), both as the platform
computes it (kinds/questionnaire/analysis.py) and as kinds/questionnaire/bundle_script.py re-runs it from the bundle's
files alone."""

from __future__ import annotations

import math
from pathlib import Path

from analysis.bundle_tables import Column, Table, row_id_column
from analysis.pseudonyms import pseudonym
from kinds.questionnaire.analysis import emotionbench_analyse, questionnaire_scores
from studies.emotionbench.data import EMOTIONS
from studies.kinds import questionnaire_with_instrument
from studies.models import QuestionnaireAnswer, QuestionnaireRun, Study, StudySituation

HERE = Path(__file__).resolve().parent
LEVELS = (
    "overall",
    "emotion",
)  # the headline's breakdowns (the platform's page has factors and situations too)
_RUN_FIELDS = (
    "run_id", "run__condition__name", "run__participant__external_id", "run__subject_key", "run__phase",
    "run__situation__emotion", "run__situation__factor_index", "run__situation__index", "run__run_index",
    "run__source", "item_number", "value", "position", "run__completed_at",
)  # fmt: skip


def _number(value) -> float | None:
    value = float(value)
    return None if not math.isfinite(value) else value


class QuestionnaireBundle:
    """What a questionnaire study's bundle holds of its own."""

    free_text = (
        "none: a questionnaire study's participants choose a point on each item's scale and write nothing"
    )
    script = HERE / "bundle_script.py"
    requirements = "pandas==3.1.1\nnumpy==2.4.6\n"
    extra_scripts: dict[str, Path] = {}

    def tables(self, study: Study, *, include_free_text: bool) -> list[Table]:
        instrument = questionnaire_with_instrument(study).instrument
        conditions = tuple(study.conditions.order_by("position", "name").values_list("name", flat=True))

        def rows():
            answers = (
                QuestionnaireAnswer.objects.filter(run__study=study)
                .order_by("run__condition__position", "run__condition__name", "run_id", "item_number")
                .values_list(*_RUN_FIELDS)
            )
            for (run, condition, external, subject, phase, emotion, factor, index, run_index, source, item,
                 value, position, completed) in answers.iterator(chunk_size=2000):  # fmt: skip
                who = pseudonym(study_id=study.pk, platform_id=external) if external is not None else None
                code = f"{emotion}-{factor}_scenario-{index}" if emotion else None
                yield [who, who or subject, run, condition, phase, emotion, code, run_index, source, item, value,
                       position, completed]  # fmt: skip

        columns = [
            row_id_column("answer"),
            Column("participant", "string", "The participant's pseudonym (participants' participant); empty for "
                   "a model's run."),
            Column("subject", "string", "Who answered: the participant's pseudonym, or the model run's key.", True),
            Column("run", "integer", "The run: one answering of the whole instrument.", True),
            Column("condition", "string", "The condition of the subject.", True, enum=conditions or None),
            Column("phase", "string", "default: as the subject feels now; evoked: after imagining the situation.",
                   True, enum=tuple(QuestionnaireRun.Phase.values)),
            Column("emotion", "string", "The situation's emotion (evoked runs)."),
            Column("situation", "string", "The situation's code (situations' code).", ),
            Column("run_index", "integer", "A model's repetition of the same run (0 for a participant).", True,
                   minimum=0),
            Column("source", "string", "Who answered, and how the run arrived.", True,
                   enum=tuple(QuestionnaireRun.Source.values)),
            Column("item_number", "integer", "The instrument's item (materials/instrument.json).", True,
                   minimum=1, maximum=instrument.items.count() or None),
            Column("value", "integer", "The answer on the instrument's scale.", True,
                   minimum=instrument.scale_min, maximum=instrument.scale_max),
            Column("position", "integer", "Where the item was shown in the run.", minimum=0),
            Column("completed_at", "datetime", "When the run was completed (UTC)."),
        ]  # fmt: skip
        answers = Table(
            key="answers",
            title="Questionnaire answers",
            description="One row per item answered in a run of the instrument, by a participant or a model.",
            columns=columns,
            rows=rows(),
            foreign_keys=[
                (["participant"], "participants", ["participant"]),
                (["situation"], "situations", ["code"]),
            ],
        )
        situations = Table(
            key="situations",
            title="Situations",
            description="The situations subjects imagined before their evoked run.",
            columns=[
                row_id_column("situation"),
                Column(
                    "code",
                    "string",
                    "The situation's code: emotion-factor_scenario-index.",
                    True,
                    unique=True,
                ),
                Column("emotion", "string", "The emotion it is meant to evoke.", True),
                Column("factor_name", "string", "The factor (kind of situation) it belongs to.", True),
                Column("text", "string", "What the subject imagined.", True),
            ],
            rows=(
                [f"{s.emotion}-{s.factor_index}_scenario-{s.index}", s.emotion, s.factor_name, s.text]
                for s in (
                    link.situation
                    for link in StudySituation.objects.filter(study=study)
                    .select_related("situation")
                    .order_by("situation__emotion", "situation__factor_index", "situation__index")
                )
            ),
            primary_key=["code"],
        )
        return [answers, situations]

    def materials(self, study: Study) -> dict[str, object]:
        instrument = questionnaire_with_instrument(study).instrument
        return {
            "instrument": {
                "name": instrument.name,
                "title": instrument.title,
                "instructions": instrument.instructions,
                "scale_min": instrument.scale_min,
                "scale_max": instrument.scale_max,
                "anchors": instrument.anchors,
                "compute_mode": instrument.compute_mode,
                "items": [
                    {"number": i.number, "text": i.text, "reverse_scored": i.reverse_scored}
                    for i in instrument.items.order_by("number")
                ],
                "categories": [
                    {"name": c.name, "item_numbers": list(c.item_numbers)}
                    for c in instrument.categories.order_by("id")
                ],
            }
        }

    def prereg_answers(self, study: Study) -> dict[str, str]:
        """The pre-registration's answers only this kind gives (studies.prereg.prereg_osf)."""
        instrument = questionnaire_with_instrument(study).instrument
        return {
            "Study type": "Experiment: each subject answers the instrument as they feel now, then again after "
            "imagining a situation (within subjects).",
            "Manipulated variables": "The situation imagined (its emotion and factor), and the condition (people "
            "or a model).",
            "Measured variables": f"The {instrument.name} ({instrument.items.count()} items on a "
            f"{instrument.scale_min}–{instrument.scale_max} scale), scored per category: "
            f"{', '.join(instrument.categories.values_list('name', flat=True))}.",
            "Materials": f"{study.study_situations.count()} situations",
        }

    def parameters(self, study: Study) -> dict:
        analysis = emotionbench_analyse(study=study)
        return {"conditions": [name for name, _, _ in analysis.conditions], "emotions": list(EMOTIONS)}

    def results(self, study: Study) -> dict:
        """The headline as the platform's EmotionBench analysis computes it (kinds/questionnaire/analysis.py)."""
        scores = questionnaire_scores(study=study)
        analysis = emotionbench_analyse(study=study, scores=scores)
        groups = []
        for result in analysis.results:
            if result.level not in LEVELS:
                continue
            test = result.two_sample
            groups.append(
                {"condition": result.condition, "level": result.level, "group": result.group,
                 "category": result.category, "n_default": test.n_default,
                 "mean_default": _number(test.mean_default), "sd_default": _number(test.sd_default),
                 "n_evoked": test.n_evoked, "mean_evoked": _number(test.mean_evoked),
                 "sd_evoked": _number(test.sd_evoked), "change": _number(test.change)}
            )  # fmt: skip
        return {"runs": len(scores), "groups": groups}


QUESTIONNAIRE_BUNDLE = QuestionnaireBundle()
