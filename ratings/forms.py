"""Validation of what participants' browsers send: the entry link's parameters and the answer forms."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django import forms
from django.core.validators import RegexValidator

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
