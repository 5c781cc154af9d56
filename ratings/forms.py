"""Validation of what participants' browsers send: the entry link's parameters and the answer forms."""

from __future__ import annotations

from django import forms
from django.core.validators import RegexValidator

from studies.platforms import RecruitingPlatform, registered_platforms
from studies.platforms.base import ID_MAX_LENGTH, ID_PATTERN, OTHER_PARAMETER_MAX_LENGTH


def _token_field() -> forms.CharField:
    return forms.CharField(
        required=False,
        max_length=ID_MAX_LENGTH,
        validators=[RegexValidator(ID_PATTERN, "This is not a valid participant or study id.")],
    )


class EntryForm(forms.Form):
    """The query string of `/s/<slug>/`: the parameters of every registered recruiting platform
    (studies/platforms/), ids validated as tokens, and the staff preview switch."""

    preview = forms.CharField(required=False, max_length=8)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for platform in registered_platforms():
            for name in platform.id_parameters():
                self.fields[name] = _token_field()
            for name in platform.other_parameters:
                self.fields[name] = forms.CharField(required=False, max_length=OTHER_PARAMETER_MAX_LENGTH)

    def clean(self):
        data = super().clean()
        entries = [entry for entry in (p.entry(data) for p in registered_platforms()) if entry is not None]
        if len(entries) > 1:
            raise forms.ValidationError("The link names participants of more than one platform.")
        self.entry = entries[0] if entries else None
        return data

    @property
    def platform_preview(self) -> RecruitingPlatform | None:
        """The platform showing the task before a person accepts it (MTurk's preview), if any."""
        return next((p for p in registered_platforms() if p.is_preview(self.cleaned_data)), None)

    @property
    def wants_staff_preview(self) -> bool:
        return self.cleaned_data.get("preview") in {"1", "true", "yes"}

    def enrollment_fields(self) -> dict | None:
        """participant_enroll's keyword arguments for this link, or None when it names no participant."""
        return self.entry.enrollment_fields() if self.entry is not None else None


class ConsentForm(forms.Form):
    decision = forms.ChoiceField(choices=[("agree", "I agree"), ("decline", "I do not agree")])
