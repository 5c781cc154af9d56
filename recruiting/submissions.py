"""Prolific's view of each participant, and what a change in it does here.

* `submission_status_apply` records a status Prolific reports (by webhook or by reconciliation). Statuses
  only move forward (`RANK`): a late, out-of-order or repeated report of an earlier status changes nothing.
* RETURNED, TIMED-OUT or REJECTED of a participant still active here frees their slot and unanswered items
  at once, through the participant lifecycle in `studies.participants` (never a copy of it).
* `submissions_approve` approves, in one bulk call, the submissions awaiting review whose participant
  completed here with their checks passed; each submission is claimed by a conditional UPDATE first, so
  two workers never approve the same one. An approval whose outcome is unknown (a 5xx, no answer) is read
  back at once and settled; what cannot be read yet stays pending until the scheduled reconciliation.
* Failed attention checks are never rejected automatically: `submission_reject` is the admin's decision.
* `submissions_reconcile` reads every page of the study's submissions and applies them, repairing whatever
  a lost webhook left; it also flags participants who completed here but are missing on Prolific.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from studies.models import Participant
from studies.participants import participant_return, participant_time_out

from .client import ProlificClient, ProlificError
from .models import ProlificStudy, ProlificSubmission, SubmissionStatus

log = logging.getLogger(__name__)

S = SubmissionStatus
# How far along a submission is. A status is applied only when it ranks above the one stored: Prolific's
# statuses never go back (RESERVED → ACTIVE → {TIMED-OUT → AWAITING REVIEW} → a decision), so an event
# delivered late or twice cannot undo a later one.
RANK = {
    S.RESERVED: 0,
    S.ACTIVE: 1,
    S.TIMED_OUT: 2,
    S.AWAITING_REVIEW: 3,
    S.RETURNED: 4,
    S.SCREENED_OUT: 4,
    S.APPROVED: 5,
    S.PARTIALLY_APPROVED: 5,
    S.REJECTED: 5,
}
FREEING = {S.RETURNED: participant_return, S.TIMED_OUT: participant_time_out, S.REJECTED: participant_return}

# Prolific's rejection categories (the admin chooses one; a message of at least 100 characters is required).
REJECTION_CATEGORIES = [
    ("TOO_QUICKLY", "Too quickly"),
    ("TOO_SLOWLY", "Too slowly"),
    ("FAILED_INSTRUCTIONS", "Failed instructions"),
    ("INCOMP_LONGITUDINAL", "Incomplete longitudinal"),
    ("FAILED_CHECK", "Failed attention check"),
    ("LOW_EFFORT", "Low effort"),
    ("MALINGERING", "Malingering"),
    ("NO_CODE", "No code"),
    ("BAD_CODE", "Bad code"),
    ("NO_DATA", "No data"),
    ("UNSUPP_DEVICE", "Unsupported device"),
    ("OTHER", "Other"),
]
REJECTION_MESSAGE_MIN = 100


class SubmissionError(Exception):
    """The request is refused; nothing was sent to Prolific and nothing written."""


@dataclass
class ApplyResult:
    changed: bool
    freed: bool = False


def _participant_for(link: ProlificStudy, pid: str, submission_id: str) -> Participant | None:
    return (
        Participant.objects.filter(study=link.study, external_id=pid).first()
        or Participant.objects.filter(study=link.study, platform_session_id=submission_id).first()
    )


def submission_status_apply(
    *,
    link: ProlificStudy,
    submission_id: str,
    pid: str,
    status: str,
    at: datetime | None = None,
    event_id: str = "",
) -> ApplyResult:
    """Records Prolific's `status` for a submission and frees our participant's place when it says so.

    Guarantees: idempotent (the same report twice changes nothing the second time); monotonic (a status
    ranking at or below the stored one is ignored, whatever order reports arrive in); the row is locked
    (`FOR UPDATE`) while the status is compared and written, so two workers applying reports for the same
    submission are serialised; the freeing goes through `studies.participants`, whose conditional UPDATE
    frees a participant at most once."""
    if status not in RANK:
        log.warning("prolific: unknown submission status %r for %s", status, submission_id)
        return ApplyResult(changed=False)
    now = timezone.now()
    participant = _participant_for(link, pid, submission_id)
    with transaction.atomic():
        row = ProlificSubmission.objects.select_for_update().filter(submission_id=submission_id).first()
        if row is None:
            try:
                with transaction.atomic():
                    row = ProlificSubmission.objects.create(
                        link=link,
                        submission_id=submission_id,
                        prolific_pid=pid,
                        participant=participant,
                        status=status,
                        status_at=at,
                        last_event_id=event_id,
                    )
                    created = True
            except IntegrityError:
                # Another worker created it between our read and our insert: lock theirs and compare.
                row = ProlificSubmission.objects.select_for_update().get(submission_id=submission_id)
                created = False
        else:
            created = False
        if not created:
            if RANK[status] <= RANK.get(row.status, -1):
                return ApplyResult(changed=False)
            row.status, row.status_at, row.last_event_id = status, at, event_id or row.last_event_id
            if row.participant_id is None and participant is not None:
                row.participant = participant
            row.save(update_fields=["status", "status_at", "last_event_id", "participant", "updated_at"])
        freed = False
        if status in FREEING and row.participant_id is not None and row.released_at is None:
            freed = FREEING[status](participant=row.participant, now=now)
            if freed:
                ProlificSubmission.objects.filter(pk=row.pk).update(released_at=now)
    return ApplyResult(changed=True, freed=freed)


# --- approvals ---------------------------------------------------------------------------------------------


def approvable(link: ProlificStudy):
    """Submissions awaiting review whose participant completed here with every check passed, not yet
    claimed for approval. A timed-out participant who later typed a code is not completed here: never
    approved automatically."""
    return ProlificSubmission.objects.filter(
        link=link,
        status=S.AWAITING_REVIEW,
        approval_claimed_at__isnull=True,
        participant__status=Participant.Status.COMPLETED,
        participant__flagged_for_exclusion=False,
    )


def needs_decision(link: ProlificStudy):
    """Submissions awaiting review that the admin must decide: failed attention checks, or not completed
    here."""
    return (
        ProlificSubmission.objects.filter(
            link=link, status=S.AWAITING_REVIEW, approval_claimed_at__isnull=True
        )
        .exclude(pk__in=approvable(link).values("pk"))
        .select_related("participant")
    )


@dataclass
class ApprovalReport:
    """What one approval run did. `approved`: submissions Prolific took (its answer, or read back as approved);
    `pending`: the study's approvals whose outcome Prolific has not confirmed yet, read back on the schedule
    (`next_check`, minutes)."""

    approved: int = 0
    pending: int = 0
    next_check: int = 0

    def summary(self) -> str:
        parts = [] if self.pending and not self.approved else [f"Approved {self.approved} submission(s)."]
        if self.pending:
            parts.append(approvals_pending_text(self.pending, self.next_check))
        return " ".join(parts)


def approvals_pending_text(pending: int, minutes: int) -> str:
    return (
        f"{pending} approval{'s are' if pending != 1 else ' is'} waiting for Prolific to confirm; checking "
        f"again in {minutes} minute{'s' if minutes != 1 else ''}."
    )


def approvals_pending(link: ProlificStudy):
    """Submissions whose approval was sent but whose outcome Prolific has not confirmed (no answer or a 5xx,
    and the read-back failed or still said awaiting review after the one re-send)."""
    return ProlificSubmission.objects.filter(
        link=link, status=S.AWAITING_REVIEW, approval_unknown_at__isnull=False
    )


def next_check_minutes(link: ProlificStudy, now: datetime | None = None) -> int:
    """Minutes until the scheduled reconciliation reads the study's submissions again (at least 1)."""
    now = now or timezone.now()
    period = timedelta(seconds=settings.PROLIFIC_RECONCILE_SECONDS)
    due = (link.last_synced_at + period) if link.last_synced_at else now + period
    return max(1, math.ceil((due - now).total_seconds() / 60))


def approval_report(link: ProlificStudy, approved: int = 0) -> ApprovalReport:
    link.refresh_from_db(fields=["last_synced_at"])
    return ApprovalReport(
        approved=approved, pending=approvals_pending(link).count(), next_check=next_check_minutes(link)
    )


def submissions_approve(
    *, link: ProlificStudy, ids: list[int] | None = None, client: ProlificClient | None = None
) -> ApprovalReport:
    """Approves submissions in one bulk call: the approvable ones (auto-approve), or the admin's choice
    `ids` among those awaiting review. Each is claimed first (a conditional UPDATE on `approval_claimed_at`),
    so concurrent callers never approve one twice. Prolific does not document bulk approval as idempotent,
    so the call itself is never retried blindly:

    * Prolific answers that it did not do it (a 4xx, 429 included): the claims are withdrawn at once and
      the error raised.
    * The outcome is unknown (no answer, or a 5xx, which can come after the approval took effect): each
      submission is read back at once (`GET /submissions/<id>/`, documented by Prolific). Approved: done.
      Still awaiting review: released and sent again, once. The read-back fails too: the claim is kept as
      pending (`approval_unknown_at`) and the scheduled reconciliation settles it from the statuses it reads
      (`_pending_approvals_settle`).

    Returns how many were approved and how many of the study's approvals are still pending."""
    candidates = (
        approvable(link)
        if ids is None
        else ProlificSubmission.objects.filter(
            link=link, pk__in=ids, status=S.AWAITING_REVIEW, approval_claimed_at__isnull=True
        )
    )
    now = timezone.now()
    claimed = [
        pk
        for pk in candidates.values_list("pk", flat=True)
        if ProlificSubmission.objects.filter(pk=pk, approval_claimed_at__isnull=True).update(
            approval_claimed_at=now
        )
    ]
    approved = 0
    if claimed:
        client = client or ProlificClient.for_link(link)
        approved = _approval_send(link, claimed, now, client, resend=True)
    return approval_report(link, approved)


def _approval_send(link: ProlificStudy, pks: list[int], claimed_at, client, *, resend: bool) -> int:
    """One bulk approval of the claimed submissions `pks`; returns how many are known to be approved."""
    pids = list(ProlificSubmission.objects.filter(pk__in=pks).values_list("prolific_pid", flat=True))
    mine = ProlificSubmission.objects.filter(pk__in=pks, approval_claimed_at=claimed_at)
    try:
        client.submissions_bulk_approve(link.prolific_study_id, pids)
    except ProlificError as exc:
        if exc.status is not None and exc.status < 500:  # Prolific answered that it did not approve them
            mine.update(approval_claimed_at=None, approval_unknown_at=None)
            raise
        log.warning("prolific: approval of %d submission(s) of %s: outcome unknown: %s", len(pks), link, exc)
        mine.update(approval_unknown_at=timezone.now())
        return _approvals_read_back(link, pks, client, resend=resend)
    except Exception:
        mine.update(approval_claimed_at=None, approval_unknown_at=None)
        raise
    mine.update(approval_accepted_at=timezone.now())
    return len(pks)


def _approvals_read_back(link: ProlificStudy, pks: list[int], client, *, resend: bool) -> int:
    """Settles approvals of unknown outcome by reading each submission back; returns how many read back as
    approved (plus those the one re-send approved)."""
    rows = list(ProlificSubmission.objects.filter(pk__in=pks, approval_unknown_at__isnull=False))
    try:
        answers = [client.submission_get(row.submission_id) for row in rows]
    except ProlificError as exc:  # kept pending: the scheduled reconciliation reads them again
        log.warning("prolific: read-back of %d approval(s) of %s failed: %s", len(rows), link, exc)
        return 0
    for row, answer in zip(rows, answers, strict=True):
        submission_status_apply(
            link=link, submission_id=row.submission_id, pid=row.prolific_pid, status=answer.get("status", "")
        )
    settled = ProlificSubmission.objects.filter(pk__in=[r.pk for r in rows]).exclude(status=S.AWAITING_REVIEW)
    approved = settled.filter(status__in=(S.APPROVED, S.PARTIALLY_APPROVED)).count()
    settled.update(approval_unknown_at=None)
    if resend:
        approved += _pending_approvals_resend(link, pks, client)
    return approved


def _pending_approvals_resend(link: ProlificStudy, pks, client) -> int:
    """Pending approvals among `pks` that Prolific still lists as awaiting review: claimed afresh (a
    conditional UPDATE, so one caller re-sends each) and sent once more, without a further re-send."""
    now = timezone.now()
    again = [
        pk
        for pk in approvals_pending(link).filter(pk__in=pks).values_list("pk", flat=True)
        if ProlificSubmission.objects.filter(pk=pk, approval_unknown_at__isnull=False).update(
            approval_claimed_at=now, approval_unknown_at=None
        )
    ]
    return _approval_send(link, again, now, client, resend=False) if again else 0


def _pending_approvals_settle(link: ProlificStudy, client) -> int:
    """The scheduled read-back, once reconciliation has applied every status Prolific lists: pending
    approvals that were approved are settled by those statuses; those still awaiting review are sent once
    more, with claims whose worker died mid-call (claimed longer ago than a call can last)."""
    ProlificSubmission.objects.filter(link=link, approval_unknown_at__isnull=False).exclude(
        status=S.AWAITING_REVIEW
    ).update(approval_unknown_at=None)
    longest = timedelta(seconds=2 * settings.PROLIFIC_TIMEOUT_SECONDS + 60)  # connect and read, a margin
    ProlificSubmission.objects.filter(
        link=link,
        status=S.AWAITING_REVIEW,
        approval_unknown_at__isnull=True,
        approval_accepted_at__isnull=True,
        approval_claimed_at__lt=timezone.now() - longest,
    ).update(approval_unknown_at=timezone.now())
    pending = list(approvals_pending(link).values_list("pk", flat=True))
    return _pending_approvals_resend(link, pending, client) if pending else 0


def submission_reject(
    *, submission: ProlificSubmission, category: str, message: str, client: ProlificClient | None = None
) -> None:
    """The admin rejects one submission awaiting review, with one of Prolific's categories and a message
    to the participant (Prolific requires at least 100 characters)."""
    if category not in dict(REJECTION_CATEGORIES):
        raise SubmissionError(f"Unknown rejection category {category!r}.")
    if len(message.strip()) < REJECTION_MESSAGE_MIN:
        raise SubmissionError(f"Prolific needs a message of at least {REJECTION_MESSAGE_MIN} characters.")
    if submission.status != S.AWAITING_REVIEW:
        raise SubmissionError("Only a submission awaiting review can be rejected.")
    now = timezone.now()
    if not ProlificSubmission.objects.filter(
        pk=submission.pk, approval_claimed_at__isnull=True, rejection_claimed_at__isnull=True
    ).update(rejection_claimed_at=now):
        raise SubmissionError("This submission is already being approved or rejected.")
    client = client or ProlificClient.for_link(submission.link)
    try:
        client.submission_transition(
            submission.submission_id,
            {"action": "REJECT", "rejection_category": category, "message": message.strip()},
        )
    except Exception:
        ProlificSubmission.objects.filter(pk=submission.pk).update(rejection_claimed_at=None)
        raise


# --- reconciliation ----------------------------------------------------------------------------------------


@dataclass
class ReconcileReport:
    seen: int = 0
    changed: int = 0
    freed: int = 0
    approved: int = 0
    missing_on_prolific: list[str] = field(default_factory=list)


def _parse_time(value) -> datetime | None:
    return parse_datetime(value) if isinstance(value, str) else None


def submissions_reconcile(*, link: ProlificStudy, client: ProlificClient | None = None) -> ReconcileReport:
    """Reads every page of the study's submissions on Prolific and applies each status (see
    `submission_status_apply`), approves what auto-approve allows, and lists the participants who completed
    here but have no submission on Prolific. Safe to run at any time, as often as wanted."""
    if not link.prolific_study_id:
        return ReconcileReport()
    client = client or ProlificClient.for_link(link)
    report = ReconcileReport()
    seen_pids = set()
    # What we already hold: a submission whose status ranks no higher is skipped without a query (the
    # apply would change nothing), so a run over a long, quiet study costs its HTTP pages and little else.
    known = dict(ProlificSubmission.objects.filter(link=link).values_list("submission_id", "status"))
    for item in client.submissions(link.prolific_study_id):
        report.seen += 1
        pid = item.get("participant_id") or item.get("participant") or ""
        seen_pids.add(pid)
        if RANK.get(item.get("status", ""), -1) <= RANK.get(known.get(item["id"]), -1):
            continue
        result = submission_status_apply(
            link=link,
            submission_id=item["id"],
            pid=pid,
            status=item.get("status", ""),
            at=_parse_time(item.get("completed_at") or item.get("started_at")),
        )
        report.changed += result.changed
        report.freed += result.freed
    report.approved = _pending_approvals_settle(link, client)
    if link.auto_approve:
        report.approved += submissions_approve(link=link, client=client).approved
    completed = Participant.objects.filter(
        study=link.study, status=Participant.Status.COMPLETED, is_preview=False
    ).values_list("external_id", flat=True)
    report.missing_on_prolific = sorted(set(completed) - seen_pids)
    ProlificStudy.objects.filter(pk=link.pk).update(last_synced_at=timezone.now())
    return report
