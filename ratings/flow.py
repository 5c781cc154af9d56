"""The participant lifecycle in one place: which steps a study kind has, and who handles each step.

Every participant has a `step` (a `Participant.Step` value). The step page `/s/<slug>/step/` always shows
the participant's current step: the view looks the step up in `STEP_HANDLERS` and calls its `get` (show
the page) or `post` (store an answer, then redirect back to the step page). A step is left only through a
service (`ratings.services.participant_step_advance` or the answer services), which moves the participant
to the next step of their study kind's sequence with a conditional UPDATE — so a second submit of an old
page finds the participant elsewhere and is a no-op.

How a study kind plugs in its own steps (the questionnaire kind does exactly this)::

    # ratings/questionnaire.py
    from ratings import flow

    def questionnaire_steps(study):
        return [Participant.Step.CONSENT, "instrument_before", "situation", "instrument_after",
                Participant.Step.DONE]

    flow.register_flow(Study.Kind.QUESTIONNAIRE, questionnaire_steps)
    flow.register_step("instrument_before", get=show_instrument, post=answer_instrument)
    ...

`RatingsConfig.ready()` imports `ratings.views` (the rating kind's handlers) and, when it exists,
`ratings.questionnaire`. A handler is `(request, participant) -> HttpResponse`; the view has already
checked that the participant belongs to the session, is active, and (for POST) that the form was posted
from this step (the hidden `step` field), so handlers only deal with their own page. Entry, consent, the
outcome pages (completed, screened out, returned, timed out) and the stop-and-return page are shared by
every kind and need no code from it. The last step (`done`) is reached through
`ratings.services.participant_complete`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse

from studies.models import Participant, Study

Handler = Callable[[HttpRequest, Participant], HttpResponse]


@dataclass(frozen=True)
class StepHandler:
    get: Handler
    post: Handler


STEP_HANDLERS: dict[str, StepHandler] = {}
FLOWS: dict[str, Callable[[Study], list[str]]] = {}


def register_step(step: str, *, get: Handler, post: Handler) -> None:
    STEP_HANDLERS[step] = StepHandler(get=get, post=post)


def register_flow(kind: str, steps: Callable[[Study], list[str]]) -> None:
    FLOWS[kind] = steps


def rating_steps(study: Study) -> list[str]:
    """Consent → instructions (with worked examples) → TEQ when asked → the items → done."""
    steps = [Participant.Step.CONSENT, Participant.Step.INSTRUCTIONS]
    if study.ask_teq:
        steps.append(Participant.Step.TEQ)
    return [*steps, Participant.Step.ITEMS, Participant.Step.DONE]


register_flow(Study.Kind.RATING, rating_steps)


def steps_for(study: Study) -> list[str]:
    try:
        return [str(step) for step in FLOWS[study.kind](study)]
    except KeyError:
        raise LookupError(f"No participant flow is registered for study kind {study.kind!r}.") from None


def step_after(study: Study, step: str) -> str:
    """The step that follows `step` in the study's sequence (`done` after the last one)."""
    steps = steps_for(study)
    index = steps.index(step)
    return steps[index + 1] if index + 1 < len(steps) else Participant.Step.DONE


def handler_for(step: str) -> StepHandler:
    try:
        return STEP_HANDLERS[step]
    except KeyError:
        raise LookupError(f"No page handles the participant step {step!r}.") from None
