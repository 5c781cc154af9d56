"""Reads for the admin: each participant's status here beside Prolific's, with mismatches marked."""

from __future__ import annotations

from dataclasses import dataclass

from studies.models import Participant

from .models import ProlificStudy, ProlificSubmission, SubmissionStatus

P, S = Participant.Status, SubmissionStatus
# Prolific statuses consistent with each of ours. Anything else is a mismatch for the admin to look at.
CONSISTENT = {
    P.ACTIVE: {S.RESERVED, S.ACTIVE},
    P.COMPLETED: {S.AWAITING_REVIEW, S.APPROVED, S.PARTIALLY_APPROVED, S.REJECTED},
    P.RETURNED: {S.RETURNED, S.REJECTED},
    P.TIMED_OUT: {S.TIMED_OUT, S.RETURNED, S.REJECTED},
    P.SCREENED_OUT: {S.AWAITING_REVIEW, S.SCREENED_OUT, S.RETURNED, S.APPROVED, S.REJECTED},
    P.EXCLUDED: {S.AWAITING_REVIEW, S.APPROVED, S.REJECTED, S.RETURNED},
}


@dataclass
class Row:
    pid: str
    ours: str
    theirs: str
    submission: ProlificSubmission | None
    participant: Participant | None
    mismatch: str


def _mismatch(participant: Participant | None, submission: ProlificSubmission | None) -> str:
    if participant is None:
        if submission.status in (S.AWAITING_REVIEW, S.APPROVED):
            return "submitted on Prolific without taking part here"
        return ""
    if submission is None:
        if participant.status == P.COMPLETED:
            return "completed here, missing on Prolific"
        return ""
    if submission.status not in CONSISTENT.get(participant.status, set()):
        return f"{participant.get_status_display().lower()} here, {submission.status.lower()} on Prolific"
    return ""


def participants_beside_prolific(*, link: ProlificStudy) -> list[Row]:
    """Every participant of the study and every Prolific submission, paired by Prolific id; previews left
    out. Two queries whatever the size."""
    participants = {
        p.external_id: p
        for p in Participant.objects.filter(study=link.study, is_preview=False).order_by("started_at")
    }
    submissions = {s.prolific_pid: s for s in ProlificSubmission.objects.filter(link=link)}
    rows = []
    for pid in list(participants) + [pid for pid in submissions if pid not in participants]:
        participant, submission = participants.get(pid), submissions.get(pid)
        rows.append(
            Row(
                pid=pid,
                ours=participant.get_status_display() if participant else "—",
                theirs=submission.status if submission else "—",
                submission=submission,
                participant=participant,
                mismatch=_mismatch(participant, submission),
            )
        )
    return rows
