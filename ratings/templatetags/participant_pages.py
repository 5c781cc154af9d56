"""Template helpers of the participant pages."""

from __future__ import annotations

from django import template

from studies import authenticity
from studies.kinds import participant_steps
from studies.markdown import markdown_html

register = template.Library()
register.filter("markdown", markdown_html)  # the consent and instructions (studies/markdown.py)

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


@register.inclusion_tag("ratings/_trap_instruction.html")
def trap_instruction(study) -> dict:
    """The study's hidden instruction (its authenticity trap), when it has one switched on: text no person
    sees or hears, asking an agent that reads the page's text for a word in a field nobody else can reach."""
    if study is None or not study.trap_hidden_instruction:
        return {}
    return {"word": authenticity.trap_word(study), "field": authenticity.TRAP_FIELD}
