"""Checking the placeholders of a text a model will be sent (a condition's prompt template, a judge's rubric).

Placeholders are Python format fields ({situation}); {{ and }} stand for literal braces. Kept apart from the models
so both generation/models.py and generation/judge_models.py use it without importing each other."""

import string

from django.core.exceptions import ValidationError


def placeholders_validate(text: str, *, allowed: tuple[str, ...], what: str = "the template") -> None:
    """Raise ValidationError naming every placeholder `text` uses that is not in `allowed`, or saying how the text
    is malformed (an unmatched brace)."""
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(text) if field is not None]
    except ValueError as exc:
        raise ValidationError(
            f"{what[0].upper()}{what[1:]} is not well formed: {exc} (write {{{{ and }}}} for literal braces)."
        ) from None
    unknown = sorted({f for f in fields if f not in allowed})
    if unknown:
        raise ValidationError(
            "Unknown placeholder(s) in %(what)s: %(unknown)s; it would reach the model unfilled. Allowed: "
            "%(allowed)s (write {{ and }} for literal braces).",
            params={
                "what": what,
                "unknown": ", ".join("{" + f + "}" for f in unknown),
                "allowed": ", ".join("{" + f + "}" for f in allowed),
            },
        )
