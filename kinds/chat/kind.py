"""The chat study: a live conversation with the condition's responder (an LLM, or a person at the responder
console), rated afterwards on PETS and the study's scale, with the authorship label shown as a second factor.

Steps: consent → opening (a corpus situation, or the participant's own) → conversation → rating → debrief (when a
label can mislead) → done.
Assignment: the spine chooses the source (the participant's condition, balanced); the label shown is chosen here,
fewest first within the source's cell (the study row is locked by enrolment), so every source × label cell stays
within one of the others. The conversation row is created at enrolment and holds both factors.
Settings: `ChatSettings` (kinds/chat/models.py).
"""

from __future__ import annotations

import random
from datetime import datetime

from django.db.models import Count, Q

from studies.enrolment_errors import StudyBudgetSpent
from studies.kinds import StudyKind, register
from studies.kinds.base import (
    CONDITIONS,
    MATERIAL,
    TEXTS,
    LaunchProblem,
    SetupTexts,
)
from studies.models import Condition, Participant, Study

from .analysis_plan import CHAT_PLAN
from .assignment import conversation_create
from .budget import chat_enrolment_admits
from .models import ChatSettings, Conversation, Label
from .turns import chat_settings

OPENING = "chat_opening"
TALK = "chat_talk"
RATE = "chat_rate"
DEBRIEF = "chat_debrief"


class ChatKind(StudyKind):
    name = "chat"
    label = "Chat study (a live conversation, rated afterwards)"
    step_labels = {
        OPENING: "Opening situation",
        TALK: "Conversation",
        RATE: "Rating of the conversation",
        DEBRIEF: "Debrief",
    }
    pages = {
        OPENING: "kinds.chat.pages.OPENING_PAGE",
        TALK: "kinds.chat.pages.TALK_PAGE",
        RATE: "kinds.chat.pages.RATE_PAGE",
        DEBRIEF: "kinds.chat.pages.DEBRIEF_PAGE",
    }
    settings_model = ChatSettings
    admin_inlines = ["kinds.chat.admin.ChatSettingsInline"]
    status_columns = [("conversations", "conversations"), ("rated", "rated"), ("fallback", "fallback used")]
    material_title = "Situations and the conversation"
    demo = "kinds.chat.demo.chat_demo_create"
    demo_staff_pages = (("Chat responder console (sign in as admin)", "/analysis/{slug}/chat/console/"),)
    setup_texts = SetupTexts(
        answers="the conversation's settings (opening, turns, wait, labels, scale, debrief)",
        items="conversations",
        welcome="You will have a short written conversation about a situation that stirs emotions, then say how "
        "it felt.",
    )
    # What researchers read (kinds/chat/analysis.py, views.py, exports.py).
    analysis = "kinds.chat.analysis.CHAT_ANALYSIS"
    analysis_page = "analysis:chat"
    analysis_urls = "kinds.chat.urls.urlpatterns"
    analysis_plan = CHAT_PLAN
    answers_export = "kinds.chat.exports.conversation_export"
    further_exports = {"transcript": "kinds.chat.exports.transcript_export"}
    power_planner = "kinds.chat.power.chat_power_plan"
    # LLM judges rate each rated conversation's transcript on the study's scale (kinds/chat/judge_format.py).
    judged = True
    judge_format = "kinds.chat.judge_format.TRANSCRIPTS"
    launch_panel = "kinds.chat.power.chat_launch_power_html"

    def steps(self, study) -> list[str]:
        return [OPENING, TALK, RATE, *([DEBRIEF] if misleading_cells(study) else [])]

    def assignments_create(self, participant, *, rng: random.Random, now: datetime) -> list:
        if not participant.is_preview and not chat_enrolment_admits(participant):
            raise StudyBudgetSpent(participant.study)  # nothing written: the enrolment rolls back
        conversation_create(participant, rng=rng, now=now)
        return []

    def launch_problems(self, study: Study, conditions: list[Condition]) -> list[str | LaunchProblem]:
        settings = self.settings(study)
        problems: list[str | LaunchProblem] = []
        unknown = [label for label in settings.labels or [] if label not in Label.values]
        if unknown or not settings.labels:
            problems.append(
                LaunchProblem(TEXTS, f"the labels shown must be some of {', '.join(Label.values)}")
            )
        if settings.min_turns > settings.max_turns:
            problems.append(LaunchProblem(TEXTS, "the minimum of turns is above the maximum"))
        if settings.min_chars > settings.max_chars:
            problems.append(LaunchProblem(TEXTS, "the minimum of characters a message is above the maximum"))
        misleading = misleading_cells(study, conditions)
        if misleading and not settings.debrief_text.strip():
            cells = "; ".join(misleading)
            problems.append(
                LaunchProblem(TEXTS, f"a label can mislead ({cells}): write the debrief text that says so")
            )
        fallback = settings.fallback_condition
        if fallback is not None and (fallback.study_id != study.pk or fallback.kind != Condition.Kind.LLM):
            problems.append(LaunchProblem(CONDITIONS, "the fallback must be an LLM condition of this study"))
        if any(c.kind == Condition.Kind.HUMAN for c in conditions) and fallback is None:
            problems.append(
                LaunchProblem(
                    CONDITIONS, "a person source needs a fallback LLM condition for replies not typed in time"
                )
            )
        if settings.opening == ChatSettings.Opening.CORPUS and not study.study_situations.exists():
            problems.append(
                LaunchProblem(MATERIAL, "the opening is a corpus situation: add the study's situations")
            )
        return problems

    def prereg_procedure(self, study: Study, design: dict) -> list[str]:
        settings = self.settings(study)
        labels = ", ".join(Label(label).label for label in settings.labels if label in Label.values)
        scale = " / ".join(str(o.get("label")) for o in settings.scale if isinstance(o, dict))
        return [
            "Design: source (the conditions: each LLM, or a person at the responder console) × label shown "
            f"({labels}), crossed and balanced between participants, one conversation each",
            f"Opening: {ChatSettings.Opening(settings.opening).label.lower()}; {settings.min_turns}–{settings.max_turns} "
            f"messages of {settings.min_chars}–{settings.max_chars} characters; replies shown no sooner than "
            f"{settings.min_reply_wait_ms} ms after the message",
            "Measures after the conversation: PETS (Schmidmaier et al., CHI 2024: 10 items on 0–100 sliders in "
            "random order; factors Emotional Responsiveness and Understanding & Trust, each the mean of its items) "
            f"and the study's scale ({settings.scale_question} {scale})"
            + ("; optional free text" if settings.ask_free_text else ""),
            "Fallback: "
            + (settings.fallback_condition.name if settings.fallback_condition else "none")
            + "; a debrief page "
            + ("follows the rating" if misleading_cells(study) else "is not needed (no label can mislead)"),
        ]

    def status_counts(self, study: Study, conditions: list[Condition]) -> dict[int, dict]:
        per = {c.pk: {"conversations": 0, "rated": 0, "fallback": 0} for c in conditions}
        rows = (
            Conversation.objects.filter(participant__study=study, participant__is_preview=False)
            .exclude(participant__status=Participant.Status.RETURNED)
            .order_by()
            .values("condition")
            .annotate(
                n=Count("id"),
                rated=Count("rating"),
                fallback=Count("id", filter=Q(fallback_used=True)),
            )
        )
        for row in rows:
            if row["condition"] in per:
                per[row["condition"]] = {
                    "conversations": row["n"],
                    "rated": row["rated"],
                    "fallback": row["fallback"],
                }
        return per

    def status_totals(self, study: Study, per_condition: dict[int, dict]) -> dict:
        return {key: sum(row[key] for row in per_condition.values()) for key, _ in self.status_columns}

    def status_summary(self, study: Study, status: dict) -> list[str]:
        settings = self.settings(study)
        return [f"labels: {', '.join(settings.labels)}", f"{settings.min_turns}–{settings.max_turns} turns"]


def misleading_cells(study: Study, conditions: list[Condition] | None = None) -> list[str]:
    """The source × label cells whose label can mislead: "a person" on an LLM (the fallback included, which can
    answer any conversation), "an AI" on a person."""
    settings = chat_settings(study)
    conditions = list(study.conditions.all()) if conditions is None else conditions
    kinds = {c.kind for c in conditions}
    if settings.fallback_condition_id is not None:
        kinds.add(Condition.Kind.LLM)
    cells = []
    if Label.PERSON in settings.labels and Condition.Kind.LLM in kinds:
        cells.append('"a person" on an LLM\'s replies')
    if Label.AI in settings.labels and Condition.Kind.HUMAN in kinds:
        cells.append('"an AI" on a person\'s replies')
    return cells


CHAT = register(ChatKind())
