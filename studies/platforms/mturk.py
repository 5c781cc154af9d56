"""Amazon Mechanical Turk, the study as an external question: MTurk appends workerId, assignmentId, hitId and
turkSubmitTo; while a worker previews the HIT assignmentId is ASSIGNMENT_ID_NOT_AVAILABLE; a finished worker
posts assignmentId and the completion code to `<turkSubmitTo>/mturk/externalSubmit`."""

from __future__ import annotations

from urllib.parse import urlsplit

from .base import Completion, RecruitingPlatform, SubmitForm
from .registry import register

PREVIEW_ASSIGNMENT = "ASSIGNMENT_ID_NOT_AVAILABLE"
DEFAULT_SUBMIT_TO = "https://www.mturk.com"


def submit_host(raw: str) -> str:
    """MTurk's submit host from `turkSubmitTo`, only when it is an https mturk.com host (the sandbox included);
    otherwise the production host. Never an arbitrary URL: the completion form posts there."""
    try:
        parts = urlsplit(raw or "")
    except ValueError:
        return DEFAULT_SUBMIT_TO
    host = (parts.hostname or "").lower()
    if parts.scheme == "https" and (host == "mturk.com" or host.endswith(".mturk.com")) and not parts.port:
        return f"https://{host}"
    return DEFAULT_SUBMIT_TO


class MTurk(RecruitingPlatform):
    name = "mturk"
    label = "Amazon Mechanical Turk"
    site_name = "Amazon Mechanical Turk"
    participant_parameter = "workerId"
    study_parameter = "hitId"
    session_parameter = "assignmentId"
    other_parameters = ("turkSubmitTo",)
    preview_notice = "Accept the HIT to start."
    returned_text = "Please also return the HIT on Amazon Mechanical Turk."
    timed_out_text = "Please return the HIT on Amazon Mechanical Turk. If you think this is a mistake, contact the requester."
    link_instructions = "the HIT as its external question"

    def platform_data(self, query) -> dict:
        return {"submit_to": submit_host(query.get("turkSubmitTo", ""))}

    def is_preview(self, query) -> bool:
        return query.get("assignmentId") == PREVIEW_ASSIGNMENT

    def completion(self, participant, code: str, redirect_url: str) -> Completion:
        submit_to = submit_host((participant.platform_data or {}).get("submit_to", ""))
        return Completion(
            submit_form=SubmitForm(
                action=f"{submit_to}/mturk/externalSubmit",
                fields={"assignmentId": participant.platform_session_id, "completion_code": code},
                button="Submit the HIT to Mechanical Turk",
            )
        )


register(MTurk())
