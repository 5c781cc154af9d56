"""The rating study's scale and worked examples: plain JSON on the study (`Study.scale`, `Study.worked_examples`),
frozen with the design, validated here once for every door (the admin's forms, `Study.clean`, the commands).

Structure::

    scale:            [{"value": 3, "label": "Good"}, {"value": 2, "label": "Okay"}, {"value": 1, "label": "Bad"}]
    worked_examples:  [{"emotion": ..., "situation": ..., "speaker_utterance": ..., "response": ...,
                        "rating": <a value of the scale>, "explanation": ...}, ...]
                      (the keys are the study kind's `worked_example_form`: a pairwise study's examples show two
                      replies and answer with a choice)

The scale is shown in the order written (best first by convention); values are whole numbers, each once, and
labels are distinct (an attention check, a worked example and an LLM judge name an option by its label).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from .exclusion_rules import exclusion_rules_normalise
from .kinds import kind_of
from .kinds.base import SCALE_EXAMPLES, WorkedExampleForm
from .planned_analysis import planned_analysis_normalise


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


def worked_examples_normalise(
    value: Any, *, form: WorkedExampleForm = SCALE_EXAMPLES, answers: list | None = None
) -> list[dict]:
    """The worked examples with every key of the kind's `form` present (texts stripped), or ValidationError listing
    every problem: each example has the texts it cannot do without and an answer among `answers` (the kind's
    `example_answers`: the scale's values for a rating study; when None, any whole number)."""
    if value in (None, ""):
        return []
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise ValidationError("worked examples are a list of examples")
    texts = [key for key in form.keys if key != form.answer_key]
    problems: list[str] = []
    out: list[dict] = []
    for n, example in enumerate(value, start=1):
        unknown = sorted(set(example) - set(form.keys))
        if unknown:
            problems.append(f"example {n}: unknown field(s) {', '.join(unknown)}")
        item = {key: str(example.get(key) or "").strip() for key in texts}
        for key in form.required:
            if not item[key]:
                problems.append(f"example {n}: the {key.replace('_', ' ')} is empty")
        answer = _example_answer(example.get(form.answer_key), answers)
        if answer is None:
            problems.append(f"example {n}: choose {form.answer_label.lower()}")
        elif answers is not None and answer not in [v for v, _ in answers]:
            problems.append(f"example {n}: {form.answer_label.lower()} {answer} is not one of the choices")
        out.append({**item, form.answer_key: answer})
    if problems:
        raise ValidationError(problems)
    return [{key: example[key] for key in form.keys} for example in out]


def _example_answer(raw: Any, answers: list | None) -> Any:
    """An example's answer as stored: the choice whose value reads as `raw` (a form posts text), else `raw` as a
    whole number when it is one; None when there is none."""
    for choice, _label in answers or []:
        if raw is not None and str(raw).strip() == str(choice):
            return choice
    if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
        raw = int(raw)
    return None if isinstance(raw, bool) or not isinstance(raw, int) else raw


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
        kind = kind_of(study)
        answers = kind.example_answers(study) or None  # None: a scale without options, any number is read
        return worked_examples_normalise(value, form=kind.worked_example_form, answers=answers)
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
