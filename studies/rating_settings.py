"""The rating study's scale and worked examples: plain JSON on the study (`Study.scale`, `Study.worked_examples`),
frozen with the design, validated here once for every door (the admin's forms, `Study.clean`, the commands).

Structure::

    scale:            [{"value": 3, "label": "Good"}, {"value": 2, "label": "Okay"}, {"value": 1, "label": "Bad"}]
    worked_examples:  [{"emotion": ..., "situation": ..., "speaker_utterance": ..., "response": ...,
                        "rating": <a value of the scale>, "explanation": ...}, ...]

The scale is shown in the order written (best first by convention); values are whole numbers, each once, and
labels are distinct (an attention check, a worked example and an LLM judge name an option by its label).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from .exclusion_rules import exclusion_rules_normalise
from .planned_analysis import planned_analysis_normalise

EXAMPLE_KEYS = ("emotion", "situation", "speaker_utterance", "response", "rating", "explanation")
EXAMPLE_TEXT_KEYS = ("situation", "speaker_utterance", "response")
# The texts of an example (every key but its rating), and the texts it cannot do without.
EXAMPLE_TEXTS = ("emotion", "situation", "speaker_utterance", "response", "explanation")


def scale_normalise(value: Any) -> list[dict]:
    """The scale as a list of {"value": int, "label": str} (labels stripped), or ValidationError listing every
    problem: at least two options, whole-number values each used once, non-empty labels distinct up to case."""
    if not isinstance(value, list) or not all(isinstance(o, dict) for o in value):
        raise ValidationError("the scale is a list of options, each with a value and a label")
    problems: list[str] = []
    out: list[dict] = []
    for n, option in enumerate(value, start=1):
        raw, label = option.get("value"), str(option.get("label", "")).strip()
        if isinstance(raw, bool) or not isinstance(raw, int):
            problems.append(f"option {n}: the value must be a whole number (got {raw!r})")
            continue
        if not label:
            problems.append(f"option {n} (value {raw}) has no label")
        out.append({"value": raw, "label": label})
    if len(value) < 2:
        problems.append("the scale needs at least two options")
    values = [o["value"] for o in out]
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        problems.append(f"each value may be used once (repeated: {', '.join(map(str, repeated))})")
    labels = [o["label"].casefold() for o in out if o["label"]]
    if len(set(labels)) != len(labels):
        problems.append("two options have the same label; participants could not tell them apart")
    if problems:
        raise ValidationError(problems)
    return out


def worked_examples_normalise(value: Any, *, scale_values: list[int] | None = None) -> list[dict]:
    """The worked examples with every key present (texts stripped), or ValidationError listing every problem:
    each example has a situation, the speaker's utterance and a response, and rates it with a value of the scale
    (`scale_values`, when given)."""
    if value in (None, ""):
        return []
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise ValidationError("worked examples are a list of examples")
    problems: list[str] = []
    out: list[dict] = []
    for n, example in enumerate(value, start=1):
        unknown = sorted(set(example) - set(EXAMPLE_KEYS))
        if unknown:
            problems.append(f"example {n}: unknown field(s) {', '.join(unknown)}")
        item = {key: str(example.get(key) or "").strip() for key in EXAMPLE_TEXTS}
        for key in EXAMPLE_TEXT_KEYS:
            if not item[key]:
                problems.append(f"example {n}: the {key.replace('_', ' ')} is empty")
        rating = example.get("rating")
        if isinstance(rating, str) and rating.strip().lstrip("-").isdigit():
            rating = int(rating)
        if isinstance(rating, bool) or not isinstance(rating, int):
            problems.append(f"example {n}: choose its rating on the scale")
        elif scale_values is not None and rating not in scale_values:
            problems.append(f"example {n}: its rating {rating} is not a value of the scale")
        out.append({**item, "rating": rating})
    if problems:
        raise ValidationError(problems)
    return [{key: example[key] for key in EXAMPLE_KEYS} for example in out]


# The study's JSON settings, in the order they are checked (the scale first: the others are read against it).
STUDY_SETTINGS = ("scale", "worked_examples", "exclusion_rules", "planned_analysis")


def study_setting_normalise(study, name: str, value: Any) -> Any:
    """One of the study's JSON settings (`name`, one of STUDY_SETTINGS) normalised by its one validator, read
    against the study's scale as it stands (worked examples rate on it, the exclusion rules know its length), or
    ValidationError listing every problem."""
    if name == "scale":
        return scale_normalise(value)
    try:
        values = [option["value"] for option in scale_normalise(study.scale)]
    except ValidationError:
        values = None
    if name == "worked_examples":
        return worked_examples_normalise(value, scale_values=values)
    if name == "exclusion_rules":
        return exclusion_rules_normalise(value, scale_points=values and len(values))
    return planned_analysis_normalise(value)


def study_settings_normalise(study) -> None:
    """`Study.clean`'s check of the study's JSON settings: each through `study_setting_normalise`, normalised in
    place; one ValidationError naming every field with a problem (the admin's forms write the same shapes)."""
    errors = {}
    for name in STUDY_SETTINGS:
        try:
            setattr(study, name, study_setting_normalise(study, name, getattr(study, name)))
        except ValidationError as exc:
            errors[name] = exc.messages
    if errors:
        raise ValidationError(errors)
