"""Forms, not JSON, for the study settings a researcher edits in the admin: the scale, worked examples,
exclusion rules, planned analysis and attention checks' expected answers (chosen by label).

Each field reads the JSON stored on the study and writes the same JSON back; it checks nothing itself beyond
"is this a number": the one validator of each shape runs in `Study.clean` (studies/rating_settings.py,
exclusion_rules.py, planned_analysis.py), and its messages land on the field. StudyAdmin picks these fields in
`formfield_for_dbfield`, so a study kind that does not show a setting gets no field for it.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from .exclusion_rules import STRAIGHT_LINING_DEFAULTS, TOO_FAST_DEFAULTS
from .kinds.base import SCALE_EXAMPLES, WorkedExampleForm
from .planned_analysis import CORRECTIONS, DEFAULT_ALPHA, DEFAULT_CORRECTION, KEYS, default_scale

MAX_SCALE_POINTS = 11
SPARE_OPTIONS = 2
SPARE_EXAMPLES = 2


def scale_choices(scale: Any) -> list[tuple[int, str]]:
    """(value, "Label") of each option of a stored scale, in its order (the default scale when it is unusable)."""
    options = scale if isinstance(scale, list) and scale else default_scale()
    out = []
    for option in options:
        try:
            out.append((int(option["value"]), str(option.get("label") or option["value"])))
        except (KeyError, TypeError, ValueError):
            continue
    return out or [(o["value"], o["label"]) for o in default_scale()]


class RowsWidget(forms.MultiWidget):
    """Sub-inputs shown as groups (a scale option, an example, a rule), each input with a visible label."""

    # In studies/templates/: the form renderer reads the apps' templates, not the project's.
    template_name = "studies/widgets/rows.html"

    def __init__(self, rows: list[tuple[str, list[tuple[str, forms.Widget]]]], *, table: bool = False):
        self.rows = rows
        self.table = table
        super().__init__([widget for _, inputs in rows for _, widget in inputs])

    def get_context(self, name, value, attrs):
        context = super().get_context(name, value, attrs)
        subwidgets = iter(context["widget"]["subwidgets"])
        groups = []
        for title, inputs in self.rows:
            items = []
            for label, _ in inputs:
                sub = next(subwidgets)
                sub["label"] = label
                sub["is_checkbox"] = sub.get("type") == "checkbox"
                items.append(sub)
            groups.append({"title": title, "inputs": items})
        context["widget"]["groups"] = groups
        context["widget"]["table"] = self.table
        context["widget"]["headers"] = [label for label, _ in self.rows[0][1]] if self.rows else []
        return context


def _in_words(widget: forms.Widget, value: Any) -> str:
    """One input's value as a researcher reads it: Yes / No for a switch, the chosen option's label for a choice,
    "" for a blank."""
    if isinstance(widget, forms.CheckboxInput):
        return "Yes" if value else "No"
    if value is None or value == "":
        return ""
    for key, label in getattr(widget, "choices", ()):
        if str(key) == str(value):
            return str(label)
    return str(value)


def value_in_words(field: forms.Field, value: Any) -> str | list[tuple[str, list[tuple[str, str]]]]:
    """A stored value of `field` as a researcher reads it, in the field's own labels: a JSON setting as its filled
    groups (`StoredJSONField.in_words`), any other value as text."""
    if isinstance(field, StoredJSONField):
        return field.in_words(value)
    return _in_words(field.widget, value)


class StoredJSONField(forms.MultiValueField):
    """A MultiValueField over one stored JSON value. Each subclass gives `decompress` (the stored JSON, or None,
    to the inputs' values) and `compress` (the inputs' values to the JSON)."""

    def __init__(self, fields, widget, **kwargs):
        kwargs.setdefault("required", False)
        super().__init__(fields=fields, widget=widget, require_all_fields=False, **kwargs)
        for field in self.fields:
            field.required = False

    def clean(self, value):
        # A disabled field cleans the stored JSON; a browser posts a textarea's line ends as CRLF while the stored
        # JSON holds LF, so an unchanged form is no edit.
        value = self.prepare_value(value)
        value = [v.replace("\r\n", "\n") if isinstance(v, str) else v for v in value]
        return super().clean(value)

    def prepare_value(self, value):
        # The stored JSON (a list of options or examples, a dict of rules) becomes the inputs' values; values
        # posted back (already one per input) are shown as typed.
        if isinstance(value, dict) or (isinstance(value, list) and value and isinstance(value[0], dict)):
            return self.decompress(value)
        if value in (None, "", [], ()):
            return self.decompress(None)
        return list(value)

    def has_changed(self, initial, data) -> bool:
        try:
            return self.clean(data) != initial
        except ValidationError:
            return True

    def in_words(self, value) -> list[tuple[str, list[tuple[str, str]]]]:
        """The stored value in the inputs' labels: (group title, [(input label, value in words)]) for each group
        with something filled in, blank inputs left out."""
        values = iter(self.prepare_value(value))
        groups = []
        for title, inputs in self.widget.rows:
            words = [(label, _in_words(widget, next(values))) for label, widget in inputs]
            if filled := [(label, text) for label, text in words if text]:
                groups.append((title, filled))
        return groups


class ScaleField(StoredJSONField):
    """The scale: its options of (value, label) and SPARE_OPTIONS blank ones (at most MAX_SCALE_POINTS), shown in
    the order written."""

    def __init__(self, *, slots: int = len(default_scale()) + 2, **kwargs):
        kwargs.pop("encoder", None), kwargs.pop("decoder", None)
        self.slots = min(max(slots, 2), MAX_SCALE_POINTS)
        rows = [
            (f"Option {n}", [("Value", forms.NumberInput(attrs={"class": "vIntegerField"})),
                             ("Label", forms.TextInput(attrs={"class": "vTextField"}))])
            for n in range(1, self.slots + 1)
        ]  # fmt: skip
        fields = [forms.IntegerField(), forms.CharField(max_length=100)] * self.slots
        super().__init__(fields, RowsWidget(rows, table=True), **kwargs)
        self.help_text = (
            "The answers participants choose from, in the order shown (best first). Each value is the number "
            "stored and analysed; blank rows are ignored (save to get more)."
        )

    def decompress(self, value) -> list:
        out: list = []
        for option in (value or [])[: self.slots]:
            out += [option.get("value"), option.get("label", "")]
        return out + [None, ""] * (self.slots - len(out) // 2)

    def compress(self, data_list) -> list[dict]:
        pairs = zip(data_list[::2], data_list[1::2], strict=True) if data_list else []
        return [{"value": v, "label": label or ""} for v, label in pairs if v is not None or label]


class WorkedExamplesField(StoredJSONField):
    """Worked examples: as many as the study has, plus SPARE_EXAMPLES blank ones, in the study kind's form
    (`StudyKind.worked_example_form`: its texts, and its answer chosen among `answers`, (value, label) each)."""

    def __init__(
        self, *, slots: int = 3, form: WorkedExampleForm = SCALE_EXAMPLES, answers: Any = None, **kwargs
    ):
        kwargs.pop("encoder", None), kwargs.pop("decoder", None)
        self.slots, self.form = slots, form
        answers = list(answers) if answers is not None else scale_choices(None)
        by_text = {str(value): value for value, _label in answers}
        choices = [("", "---------"), *((str(value), label) for value, label in answers)]
        labels = {**dict(form.texts), form.answer_key: form.answer_label, "explanation": "Why"}
        text = {"rows": 2, "cols": 60, "class": "vLargeTextField"}

        def widget(key: str) -> forms.Widget:
            if key == form.answer_key:
                return forms.Select(choices=choices)
            if key == "emotion":
                return forms.TextInput(attrs={"class": "vTextField"})
            return forms.Textarea(attrs=text)

        rows = [(f"Example {n}", [(labels[k], widget(k)) for k in form.keys]) for n in range(1, slots + 1)]
        fields = []
        for _ in range(slots):
            for key in form.keys:
                fields.append(
                    forms.TypedChoiceField(choices=choices, coerce=by_text.get, empty_value=None)
                    if key == form.answer_key
                    else forms.CharField()
                )
        super().__init__(fields, RowsWidget(rows), **kwargs)
        self.help_text = form.help_text

    def decompress(self, value) -> list:
        keys, answer = self.form.keys, self.form.answer_key
        out: list = []
        for example in (value or [])[: self.slots]:
            out += [example.get(key, None if key == answer else "") for key in keys]
        blank = [None if key == answer else "" for key in keys]
        return out + blank * (self.slots - len(out) // len(keys))

    def compress(self, data_list) -> list[dict]:
        keys, answer = self.form.keys, self.form.answer_key
        examples = [dict(zip(keys, data_list[i : i + len(keys)], strict=True))
                    for i in range(0, len(data_list), len(keys))]  # fmt: skip
        return [
            e
            for e in examples
            if any((e[k] or "").strip() for k in keys if k != answer) or e[answer] is not None
        ]


class ExclusionRulesField(StoredJSONField):
    """The declared exclusion rules as switches and thresholds (a threshold left blank takes its default)."""

    def __init__(self, **kwargs):
        kwargs.pop("encoder", None), kwargs.pop("decoder", None)
        box, number = forms.CheckboxInput, lambda: forms.NumberInput(attrs={"class": "vIntegerField"})
        rows = [
            ("Checks and completion", [("Exclude participants who failed the attention checks", box()),
                        ("Exclude participants who did not finish", box())]),
            ("Too fast", [("Exclude participants answering too fast", box()),
                          (f"…whose median answer time is below (ms; default {TOO_FAST_DEFAULTS['min_median_ms']})",
                           number())]),
            ("Straight-lining", [
                ("Exclude participants giving the same answer to every item", box()),
                (f"…over at least this many items (default {STRAIGHT_LINING_DEFAULTS['min_items']})", number()),
                ("…corroborated by a median answer time below (ms; default "
                 f"{STRAIGHT_LINING_DEFAULTS['corroborating_median_ms']}) or a wrong attention check", number()),
                ("…even with nothing to corroborate it (scales of 5 points or more only)", box()),
            ]),
            ("Authenticity", [("Exclude participants the authenticity score flags (unless cleared in review)",
                               box())]),
        ]  # fmt: skip
        fields = [forms.BooleanField(), forms.BooleanField(), forms.BooleanField(), forms.IntegerField(),
                  forms.BooleanField(), forms.IntegerField(), forms.IntegerField(), forms.BooleanField(),
                  forms.BooleanField()]  # fmt: skip
        super().__init__(fields, RowsWidget(rows), **kwargs)
        self.help_text = "Declared before launch; the analysis applies them by default (docs/analysis.md)."

    def decompress(self, value) -> list:
        rules = value if isinstance(value, dict) else {}
        fast, straight = rules.get("too_fast") or {}, rules.get("straight_lining") or {}
        return [
            bool(rules.get("attention_checks", True)), bool(rules.get("incomplete", True)),
            bool(rules.get("too_fast")), fast.get("min_median_ms"),
            bool(rules.get("straight_lining")), straight.get("min_items"),
            straight.get("corroborating_median_ms"), bool(straight.get("identical_alone", False)),
            bool(rules.get("authenticity", False)),
        ]  # fmt: skip

    def compress(self, data_list) -> dict:
        if not data_list:
            data_list = [False, False, False, None, False, None, None, False, False]
        checks, incomplete, fast_on, min_median, straight_on, min_items, corroborating, alone, authentic = (
            data_list
        )
        given = lambda **kw: {k: v for k, v in kw.items() if v is not None}  # noqa: E731
        return {
            "attention_checks": bool(checks),
            "incomplete": bool(incomplete),
            "too_fast": given(min_median_ms=min_median) if fast_on else None,
            "straight_lining": given(min_items=min_items, corroborating_median_ms=corroborating,
                                     identical_alone=bool(alone)) if straight_on else None,
            "authenticity": bool(authentic),
        }  # fmt: skip


class PlannedAnalysisField(StoredJSONField):
    """The planned analysis: the tests in words (one a line), α and the correction; the stored declaration's other
    keys (notes for the pre-registration) are kept as they are."""

    def __init__(self, *, stored: Any = None, **kwargs):
        kwargs.pop("encoder", None), kwargs.pop("decoder", None)
        self.notes = {k: v for k, v in stored.items() if k not in KEYS} if isinstance(stored, dict) else {}
        rows = [
            ("Planned analysis", [
                ("Tests (one a line)", forms.Textarea(attrs={"rows": 4, "cols": 60, "class": "vLargeTextField"})),
                ("Significance level α", forms.NumberInput(attrs={"step": "any", "class": "vIntegerField"})),
                ("Multiple-comparison correction", forms.Select(choices=list(CORRECTIONS.items()))),
            ])
        ]  # fmt: skip
        fields = [forms.CharField(), forms.FloatField(), forms.ChoiceField(choices=list(CORRECTIONS.items()))]
        super().__init__(fields, RowsWidget(rows), **kwargs)
        self.help_text = "Frozen at launch; the analysis applies this α and correction."

    def decompress(self, value) -> list:
        plan = value if isinstance(value, dict) else {}
        tests = plan.get("tests", [])
        return [
            "\n".join(tests) if isinstance(tests, list) else "",
            plan.get("alpha", DEFAULT_ALPHA),
            plan.get("correction", DEFAULT_CORRECTION),
        ]

    def compress(self, data_list) -> dict:
        if not data_list:
            return dict(self.notes)
        tests, alpha, correction = data_list
        lines = [line.strip() for line in (tests or "").splitlines() if line.strip()]
        out: dict = {**self.notes, "tests": lines, "correction": correction or DEFAULT_CORRECTION}
        if alpha is not None:
            out["alpha"] = alpha
        return out


# The study's JSON settings and the form field that edits each (StudyAdmin.formfield_for_dbfield).
JSON_SETTING_FIELDS = {
    "scale": ScaleField,
    "worked_examples": WorkedExamplesField,
    "exclusion_rules": ExclusionRulesField,
    "planned_analysis": PlannedAnalysisField,
}


class LinesField(forms.CharField):
    """A list of short texts (a participant's exclusion reasons) as a text box, one a line; blank lines dropped."""

    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", "One a line.")
        super().__init__(widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), required=False, **kwargs)

    def prepare_value(self, value):
        return "\n".join(str(line) for line in value) if isinstance(value, list) else value

    def to_python(self, value) -> list[str]:
        return [line.strip() for line in (super().to_python(value) or "").splitlines() if line.strip()]

    def has_changed(self, initial, data) -> bool:
        return (initial or []) != self.to_python(data)


def expected_value_field(scale: Any) -> forms.TypedChoiceField:
    """An attention check's expected answer, chosen by its label on the study's scale ("Okay", not 2)."""
    return forms.TypedChoiceField(
        choices=[("", "---------"), *scale_choices(scale)],
        coerce=int,
        label="Expected answer",
        help_text="The option a careful reader picks on this page.",
    )
