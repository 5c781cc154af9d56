"""Validation of what participants' browsers send: the entry link's parameters and the answer forms."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django import forms
from django.core.validators import RegexValidator

from studies import authenticity

from . import teq

MTURK_PREVIEW_ASSIGNMENT = "ASSIGNMENT_ID_NOT_AVAILABLE"
DEFAULT_TURK_SUBMIT_TO = "https://www.mturk.com"
# Recruiting platforms' ids are short tokens (Prolific: 24 hex digits; MTurk: upper-case letters and
# digits). Anything else — an unfilled "{{%PROLIFIC_PID%}}" placeholder, markup, binary — is refused.
_ID = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")


def _token_field() -> forms.CharField:
    return forms.CharField(
        required=False,
        max_length=128,
        validators=[RegexValidator(_ID, "This is not a valid participant or study id.")],
    )


class EntryForm(forms.Form):
    """The query string of `/s/<slug>/`, as Prolific and MTurk fill it in."""

    PROLIFIC_PID = _token_field()
    STUDY_ID = _token_field()
    SESSION_ID = _token_field()
    workerId = _token_field()  # noqa: N815 (MTurk's parameter names)
    assignmentId = _token_field()  # noqa: N815
    hitId = _token_field()  # noqa: N815
    turkSubmitTo = forms.CharField(required=False, max_length=200)  # noqa: N815
    preview = forms.CharField(required=False, max_length=8)

    def clean(self):
        data = super().clean()
        if data.get("PROLIFIC_PID") and data.get("workerId"):
            raise forms.ValidationError("The link names both a Prolific and an MTurk participant.")
        return data

    @property
    def is_mturk_preview(self) -> bool:
        return self.cleaned_data.get("assignmentId") == MTURK_PREVIEW_ASSIGNMENT

    @property
    def wants_staff_preview(self) -> bool:
        return self.cleaned_data.get("preview") in {"1", "true", "yes"}

    def enrollment_fields(self) -> dict | None:
        """participant_enroll's keyword arguments for this link, or None when it names no participant."""
        data = self.cleaned_data
        if data.get("PROLIFIC_PID"):
            return {
                "external_id": data["PROLIFIC_PID"],
                "platform": "prolific",
                "platform_study_id": data.get("STUDY_ID", ""),
                "platform_session_id": data.get("SESSION_ID", ""),
            }
        if data.get("workerId"):
            return {
                "external_id": data["workerId"],
                "platform": "mturk",
                "mturk_assignment_id": data.get("assignmentId", ""),
                "mturk_hit_id": data.get("hitId", ""),
            }
        return None

    def turk_submit_to(self) -> str:
        """MTurk's submit host from `turkSubmitTo`, only when it is an https mturk.com host (the sandbox
        included); otherwise the production host. Never an arbitrary URL: the completion form posts there."""
        raw = self.cleaned_data.get("turkSubmitTo") or ""
        try:
            parts = urlsplit(raw)
        except ValueError:
            return DEFAULT_TURK_SUBMIT_TO
        host = (parts.hostname or "").lower()
        if (
            parts.scheme == "https"
            and (host == "mturk.com" or host.endswith(".mturk.com"))
            and not parts.port
        ):
            return f"https://{host}"
        return DEFAULT_TURK_SUBMIT_TO


class ConsentForm(forms.Form):
    decision = forms.ChoiceField(choices=[("agree", "I agree"), ("decline", "I do not agree")])


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
