"""The one place that maps a platform's name to its RecruitingPlatform (base.py). Register a platform once, at
import of the module that defines it, imported by its app's `ready()` (the built-in ones: studies/apps.py and
recruiting/apps.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..named_registry import named_add, named_get
from .base import RecruitingPlatform

if TYPE_CHECKING:
    from studies.models import Participant, Study

PLATFORMS: dict[str, RecruitingPlatform] = {}


class UnknownPlatform(LookupError):
    pass


def register(platform: RecruitingPlatform) -> RecruitingPlatform:
    """Adds `platform` under its name. The same class again is a no-op; another class under a taken name a bug."""
    return named_add(PLATFORMS, platform, "recruiting platform")


def unregister(name: str) -> None:
    """For tests that define a platform of their own."""
    PLATFORMS.pop(name, None)


def platform_named(name: str) -> RecruitingPlatform:
    return named_get(PLATFORMS, name, UnknownPlatform, "recruiting platform")


def platform_of(holder: Study | Participant) -> RecruitingPlatform:
    """The platform of a study or a participant."""
    return platform_named(holder.platform)


def registered_platforms() -> list[RecruitingPlatform]:
    return list(PLATFORMS.values())


def platform_choices() -> list[tuple[str, str]]:
    """Choices of Study.platform and Participant.platform: every registered platform."""
    return [(platform.name, platform.label) for platform in PLATFORMS.values()]
