"""The entry's check of a Prolific link: a participant arriving with another study's STUDY_ID is refused
with a friendly page instead of being enrolled here (a link pasted into the wrong Prolific study, or a
participant editing the URL)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from studies.models import Study

from .models import ProlificStudy


def entry_refusal(request: HttpRequest, study: Study, fields: dict) -> HttpResponse | None:
    """The page refusing this entry, or None to let it through. `fields` are the link's enrollment fields;
    only Prolific arrivals at studies linked to a created Prolific study are checked."""
    if fields.get("platform") != Study.Platform.PROLIFIC:
        return None
    platform_study_id = fields.get("platform_study_id", "")
    expected = ProlificStudy.objects.filter(study=study).values_list("prolific_study_id", flat=True).first()
    if not expected or platform_study_id == expected:
        return None
    return render(request, "recruiting/wrong_study.html", {"study": study}, status=400)
