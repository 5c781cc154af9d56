"""Study kinds: one declared interface (base.StudyKind), one registry (registry.py), one module per kind."""

from .base import CONSENT, DONE, StudyKind
from .registry import (
    UnknownStudyKind,
    kind_choices,
    kind_named,
    kind_of,
    page_for,
    participant_steps,
    register,
    registered_kinds,
    step_after,
    step_choices,
    unregister,
)

__all__ = [
    "CONSENT",
    "DONE",
    "StudyKind",
    "UnknownStudyKind",
    "kind_choices",
    "kind_named",
    "kind_of",
    "page_for",
    "participant_steps",
    "register",
    "registered_kinds",
    "step_after",
    "step_choices",
    "unregister",
]
