"""Permission-checked reads for participant pages: a participant only ever reaches their own rows."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, OuterRef, Q, Subquery

from studies.models import Assignment, Participant


def participant_get_for_session(*, session, slug: str) -> Participant | None:
    """The participant this browser session enrolled in the study `slug`, with their study (one query),
    or None. The session (server-side, keyed by an unguessable cookie) is the only way a
    request names a participant."""
    participant_id = session.get(session_key(slug))
    if participant_id is None:
        return None
    return Participant.objects.select_related("study").filter(pk=participant_id, study__slug=slug).first()


def session_key(slug: str) -> str:
    return f"ratings:participant:{slug}"


@dataclass(frozen=True)
class CurrentItem:
    assignment: Assignment
    number: int  # 1-based, for "item 3 of 10"
    total: int

    @property
    def answered(self) -> int:
        return self.number - 1


def assignment_current_for_participant(*, participant: Participant) -> CurrentItem | None:
    """The participant's first unanswered assignment (with what the page shows, and where it stands among
    their items), or None when all are done. One query."""
    counts = (
        Assignment.objects.filter(participant=OuterRef("participant"))
        .order_by()
        .values("participant")
        .annotate(total=Count("pk"), answered=Count("pk", filter=Q(answered_at__isnull=False)))
    )
    current = (
        Assignment.objects.filter(participant=participant, answered_at__isnull=True)
        .select_related("response__prompt__emotion", "attention_check", "situation")
        .annotate(total=Subquery(counts.values("total")), answered=Subquery(counts.values("answered")))
        .order_by("position")
        .first()
    )
    if current is None:
        return None
    return CurrentItem(assignment=current, number=current.answered + 1, total=current.total)
