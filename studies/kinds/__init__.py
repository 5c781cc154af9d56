"""Study kinds: one declared interface (base.StudyKind), one registry (registry.py), one module per kind."""

from .base import CONSENT, DONE, StudyKind, resolved
from .registry import (
    NoQuestionnaire,
    UnknownStudyKind,
    kind_choices,
    kind_named,
    kind_of,
    kinds_with,
    page_for,
    participant_steps,
    questionnaire_with_instrument,
    register,
    registered_kinds,
    step_after,
    step_choices,
    unregister,
)

__all__ = [
    "CONSENT",
    "DONE",
    "NoQuestionnaire",
    "StudyKind",
    "UnknownStudyKind",
    "kind_choices",
    "kind_named",
    "kind_of",
    "kinds_with",
    "page_for",
    "participant_steps",
    "questionnaire_with_instrument",
    "register",
    "registered_kinds",
    "resolved",
    "step_after",
    "step_choices",
    "unregister",
]
