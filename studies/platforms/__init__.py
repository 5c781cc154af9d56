"""Recruiting platforms as one interface (base.py) and their registry (registry.py)."""

from .base import Completion, Entry, RecruitingPlatform, SubmitForm
from .registry import (
    platform_choices,
    platform_named,
    platform_of,
    register,
    registered_platforms,
    unregister,
)

__all__ = [
    "Completion",
    "Entry",
    "RecruitingPlatform",
    "SubmitForm",
    "platform_choices",
    "platform_named",
    "platform_of",
    "register",
    "registered_platforms",
    "unregister",
]
