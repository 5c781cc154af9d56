"""The one place that maps `Study.kind` to its StudyKind (see base.py). Register a kind once, at import of the
module that defines it (the built-in ones: kinds/rating/kind.py and questionnaire.py, imported by
StudiesConfig.ready)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from ..named_registry import named_add, named_get
from .base import CONSENT, DONE, SPINE_PAGES, SPINE_STEP_LABELS, StudyKind, resolved

if TYPE_CHECKING:
    from studies.models import QuestionnaireSettings, Study

KINDS: dict[str, StudyKind] = {}


class UnknownStudyKind(LookupError):
    pass


class NoQuestionnaire(LookupError):
    """The study records no questionnaire runs, or has no instrument yet."""


def register(kind: StudyKind) -> StudyKind:
    """Adds `kind` (an instance) under `kind.name`. Registering the same class again is a no-op; another class
    under a taken name is a bug."""
    return named_add(KINDS, kind, "study kind")


def unregister(name: str) -> None:
    """For tests that define a kind of their own."""
    KINDS.pop(name, None)
    _page.cache_clear()


def kind_named(name: str) -> StudyKind:
    return named_get(KINDS, name, UnknownStudyKind, "study kind")


def kind_of(study: Study) -> StudyKind:
    return kind_named(study.kind)


def questionnaire_with_instrument(study: Study) -> QuestionnaireSettings:
    """The study's questionnaire settings when its kind records questionnaire runs and its instrument is chosen:
    what models' questionnaire runs and the EmotionBench analysis need. NoQuestionnaire, naming the study,
    otherwise."""
    settings = kind_of(study).questionnaire(study)
    if settings is None or settings.instrument_id is None:
        raise NoQuestionnaire(f"study {study.slug!r} is not a questionnaire study with an instrument")
    return settings


def registered_kinds() -> list[StudyKind]:
    return list(KINDS.values())


def kinds_with(capability: Callable[[StudyKind], bool]) -> list[str]:
    """The names of the registered kinds that have `capability`, for a query over studies (`kind__in=`)."""
    return [kind.name for kind in KINDS.values() if capability(kind)]


def kind_choices() -> list[tuple[str, str]]:
    """Choices of Study.kind: every registered kind."""
    return [(kind.name, kind.label) for kind in KINDS.values()]


def step_choices() -> list[tuple[str, str]]:
    """Choices of Participant.step: every step of every registered kind, and the spine's consent and done."""
    labels = {name: label for name, label in SPINE_STEP_LABELS.items() if name != DONE}
    for kind in KINDS.values():
        labels.update(kind.step_labels)
    labels[DONE] = SPINE_STEP_LABELS[DONE]
    return list(labels.items())


def participant_steps(study: Study) -> list[str]:
    """The study's whole participant sequence: consent, the kind's steps, done."""
    return [CONSENT, *kind_of(study).steps(study), DONE]


def step_after(study: Study, step: str) -> str:
    """The step that follows `step` in the study's sequence (`done` after the last one)."""
    steps = participant_steps(study)
    index = steps.index(step)
    return steps[index + 1] if index + 1 < len(steps) else DONE


def page_for(study: Study, step: str):
    """The page object serving `step` for this study's kind (a kind's own page, or the spine's)."""
    path = kind_of(study).pages.get(step)
    page = _page(path) if path is not None else SPINE_PAGES.get(step)
    if page is None:
        raise LookupError(f"No page handles the participant step {step!r} of a {study.kind} study.")
    return page


@cache
def _page(path: str):
    return resolved(path)
