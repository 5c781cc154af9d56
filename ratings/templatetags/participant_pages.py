"""Template helpers of the participant pages."""

from __future__ import annotations

from django import template

from studies.kinds import participant_steps

register = template.Library()

# Steps a participant passes through without a page of their own.
_NOT_SHOWN = {"done"}


@register.inclusion_tag("ratings/_step_progress.html")
def step_progress(participant) -> dict:
    """The "Step 2 of 4" of the participant's current step, from their study's sequence of steps; nothing
    when the step is not in it (a preview of a retired step, say)."""
    if participant is None:
        return {}
    steps = [step for step in participant_steps(participant.study) if step not in _NOT_SHOWN]
    try:
        number = steps.index(participant.step) + 1
    except ValueError:
        return {}
    return {"number": number, "total": len(steps)}
