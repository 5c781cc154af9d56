"""What the entry checks before it enrolls or resumes anyone, beyond a well-formed link.

* The link's study: where the study knows its platform id (`Study.platform_study_id`), a link naming
  another study (Prolific's STUDY_ID, MTurk's hitId) is refused.
* Resuming: knowing a participant's id is not enough to become them. A browser that does not already hold
  the participant in its session may resume only with the same Prolific SESSION_ID or MTurk assignmentId
  the participant started with; otherwise (including when the platform sent none) it gets the "already
  started in another browser" page and nothing of theirs. A participant who has finished, or left, sees their
  outcome in any browser ("you have finished, your code is ...").
* New enrollments are counted per study, and per address where the study sets a limit
  (`Study.enrollments_per_address`, `config.ratelimit.enrollment_refused`).

The entry view calls `entry_refusal` after it has seen that the session does not already hold this id.
"""

from __future__ import annotations

import math

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from config.ratelimit import enrollment_refused
from studies.models import Participant, Study
from studies.participants import participant_find
from studies.platforms import platform_of

# Participants whose outcome may be shown to any browser with their id: they can do nothing more, and it reveals
# nothing but the outcome (for a finished one, "you have finished" and the study's code, which every finished
# participant is given), never their answers; `participant_enroll` never restarts them.
_FINISHED_FOR_GOOD = (
    Participant.Status.COMPLETED,
    Participant.Status.EXCLUDED,
    Participant.Status.SCREENED_OUT,
    Participant.Status.RETURNED,
    Participant.Status.TIMED_OUT,
)


def _page(request: HttpRequest, study: Study, template: str, *, status: int, **context) -> HttpResponse:
    return render(
        request,
        f"ratings/{template}",
        {"study": study, "participant": None, "platform": platform_of(study), **context},
        status=status,
    )


def link_names_another_study(study: Study, fields: dict) -> bool:
    """True when the study knows its platform id and the link names a different (or no) study."""
    expected = study.platform_study_id.strip()
    if not expected:
        return False
    return fields.get("platform_study_id") != expected


def resume_allowed(participant: Participant, fields: dict) -> bool:
    """May a browser that does not hold `participant` in its session continue as them? Only with the
    platform's per-attempt id they started with (Prolific SESSION_ID, MTurk assignmentId)."""
    stored = participant.platform_session_id
    return bool(stored) and fields.get("platform_session_id", "") == stored


def limited_enrollment(request: HttpRequest, study: Study) -> HttpResponse | None:
    """Counts a new enrollment; the "too many new sessions" page (429) when over a limit, saying which."""
    per_address = study.enrollments_per_address
    bucket, retry_after = enrollment_refused(request, study_id=study.pk, per_address=per_address)
    if bucket is None:
        return None
    response = _page(
        request,
        study,
        "too_many_starts.html",
        status=429,
        retry_minutes=math.ceil(retry_after / 60),
        per_address=per_address if bucket == "enroll-ip" else None,
    )
    response["Retry-After"] = str(retry_after)
    return response


def entry_refusal(request: HttpRequest, study: Study, fields: dict) -> HttpResponse | None:
    """The page refusing this entry link, or None when the entry may enroll or resume."""
    if link_names_another_study(study, fields):
        return _page(request, study, "bad_link.html", status=400)
    existing = participant_find(study, fields["external_id"])  # hand-written: every arrival asks it
    if existing is None:
        return limited_enrollment(request, study)
    if existing.status in _FINISHED_FOR_GOOD or resume_allowed(existing, fields):
        return None
    return _page(request, study, "another_browser.html", status=409)
