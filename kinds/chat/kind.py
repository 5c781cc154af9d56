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

from studies.kinds import StudyKind, register

from .analysis_plan import CHAT_PLAN
from .assignment import conversation_create
from .models import ChatSettings

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
    # What researchers read (kinds/chat/analysis.py, views.py, exports.py).
    analysis = "kinds.chat.analysis.CHAT_ANALYSIS"
    analysis_page = "analysis:chat"
    analysis_urls = "kinds.chat.urls.urlpatterns"
    analysis_plan = CHAT_PLAN
    answers_export = "kinds.chat.exports.conversation_export"
    further_exports = {"transcript": "kinds.chat.exports.transcript_export"}
    power_planner = "kinds.chat.power.chat_power_plan"
    launch_panel = "kinds.chat.power.chat_launch_power_html"

    def steps(self, study) -> list[str]:
        return [OPENING, TALK, RATE, DEBRIEF]

    def assignments_create(self, participant, *, rng: random.Random, now: datetime) -> list:
        conversation_create(participant, rng=rng, now=now)
        return []


CHAT = register(ChatKind())
