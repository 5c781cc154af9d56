"""Template helpers of the participant pages."""

from __future__ import annotations

from django import template

from studies import authenticity, pages

register = template.Library()


@register.inclusion_tag("ratings/_step_progress.html")
def step_progress(participant) -> dict:
    """The "Step 2 of 4" of the participant's current step (studies.pages.step_progress)."""
    return pages.step_progress(participant)


@register.inclusion_tag("ratings/_trap_instruction.html")
def trap_instruction(study) -> dict:
    """The study's hidden instruction (its authenticity trap), when it has one switched on: text no person
    sees or hears, asking an agent that reads the page's text for a word in a field nobody else can reach."""
    if study is None or not study.trap_hidden_instruction:
        return {}
    return {"word": authenticity.trap_word(study), "field": authenticity.TRAP_FIELD}
