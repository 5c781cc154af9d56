"""The rating kind's participant forms: an item's answer and the TEQ."""

from __future__ import annotations

from django import forms

from studies import authenticity

from . import teq


class ItemAnswerForm(forms.Form):
    """One rating: which of the participant's own items (its position) and the chosen scale value."""

    position = forms.IntegerField(min_value=0, max_value=10_000)
    value = forms.IntegerField(min_value=-1_000, max_value=1_000, required=False)
    # The picture check's "I can't see the picture" button (name `picture`, value `skip`) instead of a value.
    picture = forms.ChoiceField(choices=[("skip", "skip")], required=False)

    def clean(self) -> dict:
        """One answer: a scale value, or "I can't see the picture" (the value `authenticity.PICTURE_SKIPPED`)."""
        cleaned = super().clean()
        if cleaned.get("picture") == "skip":
            cleaned["value"] = authenticity.PICTURE_SKIPPED
        elif cleaned.get("value") is None and "value" not in self.errors:
            self.add_error("value", "Choose an answer.")
        return cleaned


class TeqForm(forms.Form):
    """The 16 TEQ statements, each with the five frequency answers."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for number, text in teq.ITEMS.items():
            self.fields[f"teq_{number}"] = forms.ChoiceField(
                label=text,
                choices=teq.OPTIONS,
                widget=forms.RadioSelect,
                error_messages={"required": "Please choose an answer for this statement."},
            )

    def answers(self) -> dict[int, str]:
        return {number: self.cleaned_data[f"teq_{number}"] for number in teq.ITEMS}

    def items(self):
        """(number, bound field) pairs for the template."""
        return [(number, self[f"teq_{number}"]) for number in teq.ITEMS]
