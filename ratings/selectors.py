"""Permission-checked reads for participant pages: a participant only ever reaches their own rows."""

from __future__ import annotations

from dataclasses import dataclass

from studies.models import Assignment, Participant, Study


def participant_get_for_session(*, session, study: Study) -> Participant | None:
    """The participant this browser session enrolled in `study`, or None. The session (server-side, keyed
    by an unguessable cookie) is the only way a request names a participant."""
    participant_id = session.get(session_key(study))
    if participant_id is None:
        return None
    return (
        Participant.objects.select_related("study", "condition")
        .filter(pk=participant_id, study=study)
        .first()
    )


def session_key(study: Study) -> str:
    return f"ratings:participant:{study.pk}"


@dataclass(frozen=True)
class CurrentItem:
    assignment: Assignment
    number: int  # 1-based, for "item 3 of 10"
    total: int

    @property
    def answered(self) -> int:
        return self.number - 1


def assignment_current_for_participant(*, participant: Participant) -> CurrentItem | None:
    """The participant's first unanswered assignment (with what the page shows), or None when all are done."""
    mine = Assignment.objects.filter(participant=participant)
    current = (
        mine.filter(answered_at__isnull=True)
        .select_related("response__prompt__emotion", "attention_check", "situation")
        .order_by("position")
        .first()
    )
    if current is None:
        return None
    total = mine.count()
    answered = mine.filter(answered_at__isnull=False).count()
    return CurrentItem(assignment=current, number=answered + 1, total=total)
