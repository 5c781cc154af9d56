"""The questionnaire study (the EmotionBench design, Huang et al.): an instrument such as PANAS answered "as you
feel now", then again after imagining a situation — by crowd participants and by the configured models.

Steps: consent → demographics (when the study asks) → the instrument (default) → the situation to imagine →
the instrument again (evoked) → done.
Assignment: one situation of the study per participant, the least used first (random among ties).
Settings: `QuestionnaireSettings` (instrument, demographics, item order, model runs, significance level).
"""

from __future__ import annotations

import random
from datetime import datetime

from django.db.models import Count, Exists, OuterRef, Q

from studies.balance_counts import live_pages
from studies.balancing import fewest_first, live_assignments
from studies.kinds import StudyKind, register
from studies.kinds.base import TRAP_FIELDS, AnalysisPlan, PlannedTest, SetupTexts
from studies.models import (
    Assignment,
    Condition,
    Instrument,
    Participant,
    QuestionnaireRun,
    QuestionnaireSettings,
    Situation,
    Study,
    StudySituation,
)

DEMOGRAPHICS = Participant.Step.DEMOGRAPHICS
DEFAULT = Participant.Step.Q_DEFAULT
SITUATION = Participant.Step.Q_SITUATION
EVOKED = Participant.Step.Q_EVOKED


def instrument_scale(instrument: Instrument) -> list[tuple[int, str]]:
    """The instrument's answers as its rows show them: (value, label), the label its anchor or the number."""
    values = list(range(instrument.scale_min, instrument.scale_max + 1))
    anchors = list(instrument.anchors or [])
    return [(v, anchors[i] if i < len(anchors) and anchors[i] else str(v)) for i, v in enumerate(values)]


def situation_live_counts(*, study: Study, now: datetime) -> dict[int, int]:
    """Live assignments per situation id of the study (zeros included), counted from the pages (what
    enrolment's running totals, studies/balance_counts.py `live_pages`, must equal)."""
    counts = dict.fromkeys(
        StudySituation.objects.filter(study=study).values_list("situation_id", flat=True), 0
    )
    rows = (
        Assignment.objects.filter(
            participant__study=study, kind=Assignment.Kind.SITUATION, situation__in=list(counts)
        )
        .filter(live_assignments(study, now))
        .order_by()
        .values("situation")
        .annotate(n=Count("id"))
    )
    for row in rows:
        counts[row["situation"]] = row["n"]
    return counts


# The questionnaire kind's planned analysis (analysis/emotionbench.py: the change test behind each mark is the
# primary one).
QUESTIONNAIRE_PLAN = AnalysisPlan(
    primary=PlannedTest(
        "change",
        "change from the default to the evoked score per emotion and category: paired t-test where the same "
        "subjects answered both (participants), else the paper's F-test then Student's or Welch's t (models)",
    ),
    secondary=(
        PlannedTest("two_sample", "the paper's two-sample test for participants too, for comparison"),
        PlannedTest("agreement", "agreement of the marks across situations of one emotion"),
    ),
)


class QuestionnaireKind(StudyKind):
    name = "questionnaire"
    label = "Questionnaire study (instrument before and after a situation)"
    step_labels = {
        DEMOGRAPHICS: "Demographics",
        DEFAULT: "Questionnaire (as you feel now)",
        SITUATION: "Situation to imagine",
        EVOKED: "Questionnaire (after the situation)",
    }
    pages = {
        DEMOGRAPHICS: "kinds.questionnaire.pages.DEMOGRAPHICS_PAGE",
        DEFAULT: "kinds.questionnaire.pages.INSTRUMENT_PAGE",
        SITUATION: "kinds.questionnaire.pages.SITUATION_PAGE",
        EVOKED: "kinds.questionnaire.pages.INSTRUMENT_PAGE",
    }
    settings_model = QuestionnaireSettings
    status_columns = [("questionnaire_runs", "runs")]
    analysis = "kinds.questionnaire.entry.QUESTIONNAIRE_ANALYSIS"
    analysis_page = "analysis:emotionbench"
    analysis_urls = "kinds.questionnaire.urls.urlpatterns"
    demo = "kinds.questionnaire.demo.questionnaire_demo_ensure"
    admin_inlines = [
        "kinds.questionnaire.admin.QuestionnaireSettingsInline",
        "kinds.questionnaire.admin.StudySituationInline",
    ]
    generation_admin_view = "kinds.questionnaire.admin.generation_view"
    material_title = "Instrument and situations"
    traps = TRAP_FIELDS
    bundle = "kinds.questionnaire.bundle.QUESTIONNAIRE_BUNDLE"
    analysis_plan = QUESTIONNAIRE_PLAN
    setup_texts = SetupTexts(
        answers="the instrument's settings (demographics, item order)",
        items="questionnaires",
        welcome="You will say how you feel on a short questionnaire, imagine one situation, then answer the "
        "questionnaire again.",
    )

    def questionnaire(self, study: Study) -> QuestionnaireSettings:
        return self.settings(study)

    def picture_options(self, study: Study) -> list[dict] | None:
        """The instrument's scale as its rows show it (the picture check asks for one of its answers)."""
        instrument = self.settings(study).instrument
        if instrument is None:
            return None
        return [{"value": str(value), "label": label} for value, label in instrument_scale(instrument)]

    def steps(self, study: Study) -> list[str]:
        ask = self.settings(study).ask_demographics
        return [*([DEMOGRAPHICS] if ask else []), DEFAULT, SITUATION, EVOKED]

    def prereg_procedure(self, study: Study, design: dict) -> list[str]:
        settings = design.get("kind_settings") or {}
        instrument = self.settings(study).instrument
        return [
            f"Instrument: {instrument.name if instrument else '(none yet)'}, answered as the participant feels now, "
            "then again after imagining one situation",
            f"Situations: {study.study_situations.count()}; demographics asked: "
            f"{'yes' if settings.get('ask_demographics') else 'no'}",
        ]

    def enrollable(self) -> Q:
        """Nothing to imagine, nobody to take: the study has a situation."""
        return Q(Exists(StudySituation.objects.filter(study=OuterRef("study"))))

    def assignments_create(
        self, participant: Participant, *, rng: random.Random, now: datetime
    ) -> list[Assignment]:
        study = participant.study
        situations = Situation.objects.filter(study_situations__study=study)
        counts = live_pages(study, now, Assignment.Kind.SITUATION, situations)
        situation_id = fewest_first(counts, rng)[0]
        return [
            Assignment.objects.create(
                participant=participant, position=0, kind=Assignment.Kind.SITUATION, situation_id=situation_id
            )
        ]

    def launch_problems(self, study: Study, conditions: list[Condition]) -> list[str]:
        problems = []
        if self.settings(study).instrument_id is None:
            problems.append("a questionnaire study needs an instrument")
        if not study.study_situations.exists():
            problems.append("a questionnaire study needs at least one situation")
        return problems

    def status_counts(self, study: Study, conditions: list[Condition]) -> dict[int, dict]:
        """Completed questionnaire runs per condition (models' runs included, staff previews never)."""
        runs = (
            QuestionnaireRun.objects.filter(study=study, completed_at__isnull=False)
            .exclude(participant__is_preview=True)
            .values("condition")
            .annotate(n=Count("id"))
            .values_list("condition", "n")
        )
        per = {condition.pk: {"questionnaire_runs": 0} for condition in conditions}
        for cid, n in runs:
            per[cid] = {"questionnaire_runs": n}
        return per

    def status_totals(self, study: Study, per_condition: dict[int, dict]) -> dict:
        return {"questionnaire_runs": sum(row["questionnaire_runs"] for row in per_condition.values())}

    def status_summary(self, study: Study, status: dict) -> list[str]:
        instrument = self.settings(study).instrument
        situations = study.study_situations.count()
        return [
            f"instrument {instrument.name if instrument else '(none yet)'}",
            f"{situations} situation{'' if situations == 1 else 's'}",
        ]


QUESTIONNAIRE = register(QuestionnaireKind())
