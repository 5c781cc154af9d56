"""Bonuses: granted by a rule (an amount per rating) or from an uploaded CSV, then paid on Prolific in bulk.

Exactly once, although Prolific's pay call is not idempotent:
* a bonus is unique per (study, participant, reason), so granting twice adds nothing;
* unpaid bonuses are gathered into one `BonusBatch` under a lock on the study's link row;
* the batch is set up on Prolific (a draft bulk bonus: harmless if repeated, it is only paid when we pay it);
* the pay call is claimed by a conditional UPDATE (SET_UP → PAYING), so one worker makes it;
* a batch left PAYING (error or timeout, perhaps after Prolific paid) is reconciled by reading the bulk
  bonus's status on Prolific: paid → PAID; still unpaid → back to SET_UP for the next run; no answer → left
  PAYING for the next run. Only once its pay call is over: the worker that made it recorded an unknown
  outcome, or claimed it longer ago than a pay call can last. While the call is in flight Prolific still says
  unpaid, and reconciling then would pay the batch a second time.
* That read-back (`GET bulk-bonus-payments/<id>/`) is not in Prolific's public API reference: any answer other
  than a status we know (a 404, another refusal, a status we do not know) is settled from what Prolific
  documents instead, each submission's `bonus_payments` (`_from_submissions`): every line shows → PAID; lines
  missing → read again until PAYMENT_LAG after the pay call (Prolific pays asynchronously), then CHECK; totals
  that match neither → CHECK. A CHECK batch is never paid again by itself, never silently stuck: the admin
  shows it, and the researcher, having looked at the study's bonuses on Prolific, decides
  (`bonus_batch_decide`: paid, or not paid and released to be paid in a new batch).

What is paid at all:
* only ids Prolific lists as submissions of the study: the list is read before a batch is gathered, and a
  bonus of any other id (a made-up PROLIFIC_PID that completed here) is held back and reported, so it can
  never make Prolific refuse the whole batch ("Invalid ids") and block everyone else's bonus;
* the per-rating rule skips participants flagged for exclusion unless the study's `bonus_flagged` says so;
* a batch Prolific refuses to set up becomes REFUSED with Prolific's words and the next step; the other
  batches go on. The researcher can release it (`bonus_batch_decide`).
"""

from __future__ import annotations

import csv
import io
import logging
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from studies.models import Participant

from .client import ProlificClient, ProlificError
from .models import Bonus, BonusBatch, ProlificStudy, ProlificSubmission

log = logging.getLogger(__name__)

MAX_BONUS = Decimal("100.00")  # per participant and reason: a typo (250 for 2.50) must not be paid
# Bulk bonus statuses read back from Prolific. Anything else (a status still in progress, or one we do not
# know) leaves the batch PAYING: better a bonus paid late than twice.
PAID_STATUSES = {"PAID", "COMPLETED", "APPROVED"}
UNPAID_STATUSES = {"SET_UP", "CREATED", "DRAFT", "UNPAID"}
#: Batches still on their way to being paid (counted as pending).
# Prolific pays a bulk bonus asynchronously ("in the following minutes"): lines of a batch of unknown outcome
# that do not show on the submissions yet are read again until this long after the pay call.
PAYMENT_LAG_MINUTES = 30
PAYMENT_LAG = timedelta(minutes=PAYMENT_LAG_MINUTES)
OPEN_STATES = (BonusBatch.State.NEW, BonusBatch.State.SET_UP, BonusBatch.State.PAYING)


class BonusError(Exception):
    """The bonuses are refused; nothing was written."""


def _amount(raw: str) -> Decimal:
    try:
        value = Decimal(raw.strip()).quantize(Decimal("0.01"))
    except (InvalidOperation, AttributeError):
        raise BonusError(f"{raw!r} is not an amount.") from None
    if value <= 0 or value > MAX_BONUS:
        raise BonusError(f"{value} is outside 0.01–{MAX_BONUS}.")
    return value


def _grant(link: ProlificStudy, rows: list[tuple[str, Decimal]], reason: str) -> int:
    """Creates the bonuses that do not exist yet; returns how many were new."""
    existing = set(Bonus.objects.filter(link=link, reason=reason).values_list("prolific_pid", flat=True))
    new = [
        Bonus(link=link, prolific_pid=pid, reason=reason, amount=amount)
        for pid, amount in rows
        if pid not in existing
    ]
    Bonus.objects.bulk_create(new, ignore_conflicts=True)  # a concurrent grant: the unique key keeps one
    return len(new)


def bonuses_grant_per_rating(
    *, link: ProlificStudy, amount_per_rating: Decimal | str, reason: str = "per-rating"
) -> int:
    """Grants each completed participant `amount_per_rating` per rating they gave (attention checks
    excluded); participants flagged for exclusion only when the study's `bonus_flagged` is on. Idempotent
    per reason: running it again grants nothing new."""
    amount_per_rating = _amount(str(amount_per_rating))
    participants = Participant.objects.filter(
        study=link.study, status=Participant.Status.COMPLETED, is_preview=False
    )
    if not link.bonus_flagged:
        participants = participants.filter(flagged_for_exclusion=False)
    participants = (
        participants.annotate(
            n=Count(
                "assignments", filter=Q(assignments__kind="response", assignments__answered_at__isnull=False)
            )
        )
        .filter(n__gt=0)
        .values_list("external_id", "n")
    )
    rows = [(pid, min(amount_per_rating * n, MAX_BONUS)) for pid, n in participants]
    return _grant(link, rows, reason[:100])


def bonuses_import_csv(*, link: ProlificStudy, text: str, reason: str) -> int:
    """Grants the bonuses of a CSV of `participant_id,amount` lines (a header line is allowed). Every line
    is checked first: one bad line refuses the whole file, with its line number, and writes nothing."""
    if not reason.strip():
        raise BonusError(
            "Give the bonuses a reason (e.g. 'top-raters-june'): it keeps them from being paid twice."
        )
    known = set(Participant.objects.filter(study=link.study).values_list("external_id", flat=True))
    rows, errors, seen = [], [], set()
    for number, line in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not line or not "".join(line).strip():
            continue
        if number == 1 and line[0].strip().lower() in ("participant_id", "pid", "prolific_pid"):
            continue
        if len(line) != 2:
            errors.append(f"line {number}: expected participant_id,amount")
            continue
        pid = line[0].strip()
        try:
            amount = _amount(line[1])
        except BonusError as exc:
            errors.append(f"line {number}: {exc}")
            continue
        if pid not in known:
            errors.append(f"line {number}: {pid!r} is not a participant of this study")
        elif pid in seen:
            errors.append(f"line {number}: {pid!r} appears twice")
        seen.add(pid)
        rows.append((pid, amount))
    if errors:
        raise BonusError("; ".join(errors[:20]))
    if not rows:
        raise BonusError("The file has no bonuses.")
    return _grant(link, rows, reason.strip()[:100])


def _batch_gather(link: ProlificStudy, on_prolific: set[str]) -> BonusBatch | None:
    """Puts every unbatched bonus of the study whose id is in `on_prolific` into one new batch. Locks the link
    row (`FOR UPDATE`) so two workers gathering at once cannot both take the same bonuses."""
    with transaction.atomic():
        ProlificStudy.objects.select_for_update().get(pk=link.pk)
        bonuses = list(
            Bonus.objects.filter(link=link, batch__isnull=True, prolific_pid__in=on_prolific).order_by(
                "prolific_pid", "id"
            )
        )
        if not bonuses:
            return None
        totals: dict[str, Decimal] = {}
        for bonus in bonuses:
            totals[bonus.prolific_pid] = totals.get(bonus.prolific_pid, Decimal(0)) + bonus.amount
        text = "".join(f"{pid},{amount}\n" for pid, amount in totals.items())
        batch = BonusBatch.objects.create(link=link, csv=text)
        Bonus.objects.filter(pk__in=[b.pk for b in bonuses]).update(batch=batch)
    return batch


@dataclass
class PayReport:
    paid_batches: int = 0
    paid_bonuses: int = 0
    reconciled: int = 0
    pending: int = 0
    held_pids: list[str] = field(default_factory=list)  # not submissions of the study on Prolific
    refused: int = 0  # batches Prolific refused to set up
    to_check: int = 0  # batches whose payment the researcher must check on Prolific

    def summary(self) -> str:
        text = f"{self.paid_bonuses} bonus(es) paid in {self.paid_batches} batch(es); {self.pending} batch(es) pending."
        if self.held_pids:
            text += f" Held back, not submissions of this study on Prolific (never sent): {', '.join(self.held_pids)}."
        if self.refused:
            text += f" {self.refused} batch(es) refused by Prolific: see the batch's note, then release it."
        if self.to_check:
            text += (
                f" {self.to_check} batch(es) to check: look at the study's bonuses on Prolific, then choose "
                "Paid or Not paid below."
            )
        return text


def _set_up(batch: BonusBatch, client: ProlificClient) -> None:
    """Sets the batch up on Prolific. A refusal (4xx) marks it REFUSED with Prolific's words; a transient
    failure leaves it NEW for the next run. Either way the other batches go on."""
    try:
        answer = client.bonus_set_up(batch.link.prolific_study_id, batch.csv)
    except ProlificError as exc:
        refused = not exc.transient and exc.status is not None
        BonusBatch.objects.filter(pk=batch.pk, state=BonusBatch.State.NEW).update(
            state=BonusBatch.State.REFUSED if refused else BonusBatch.State.NEW, last_error=str(exc)[:500]
        )
        return
    bulk_id = answer.get("id", "")
    if not bulk_id:
        BonusBatch.objects.filter(pk=batch.pk).update(
            last_error="Prolific set up the bonuses but returned no id; the next run sets them up again."
        )
        return
    BonusBatch.objects.filter(pk=batch.pk, state=BonusBatch.State.NEW).update(
        state=BonusBatch.State.SET_UP, prolific_bulk_id=bulk_id, last_error=""
    )


def _pay(batch: BonusBatch, client: ProlificClient) -> bool:
    """Makes the pay call if this worker claims it. Returns whether the batch is known to be paid."""
    if not BonusBatch.objects.filter(pk=batch.pk, state=BonusBatch.State.SET_UP).update(
        state=BonusBatch.State.PAYING, pay_claimed_at=timezone.now(), last_error=""
    ):
        return False
    try:
        client.bonus_pay(batch.prolific_bulk_id)
    except ProlificError as exc:
        # Unknown outcome (it may have been paid before the answer was lost): left PAYING for reconciliation.
        BonusBatch.objects.filter(pk=batch.pk).update(last_error=str(exc)[:500])
        return False
    BonusBatch.objects.filter(pk=batch.pk, state=BonusBatch.State.PAYING).update(
        state=BonusBatch.State.PAID, paid_at=timezone.now(), last_error=""
    )
    return True


def _cents(amount) -> int:
    return int((Decimal(str(amount)) * 100).to_integral_value())


def _lines(csv_text: str) -> dict[str, int]:
    """A batch's `participant_id,amount` lines, in cents per participant."""
    out: dict[str, int] = {}
    for line in csv_text.strip().splitlines():
        pid, _, amount = line.partition(",")
        out[pid] = out.get(pid, 0) + _cents(amount)
    return out


def _from_submissions(batch: BonusBatch, client: ProlificClient) -> str:
    """Tells from Prolific's documented submissions (`GET /submissions/<id>/` lists each bonus paid on it,
    in cents, as `bonus_payments`) whether a batch of unknown outcome was paid: per participant, the bonuses
    Prolific lists are compared with those of our batches already paid plus this one. Returns "paid" (every
    line shows), "unpaid" (no line shows), "partly" (some do), "unclear" (a total matches neither: a bonus paid
    some other way) or "unread" (a submission could not be read)."""
    link = batch.link
    lines = _lines(batch.csv)
    before: dict[str, int] = {}
    for other in BonusBatch.objects.filter(link=link, state=BonusBatch.State.PAID).exclude(pk=batch.pk):
        for pid, cents in _lines(other.csv).items():
            before[pid] = before.get(pid, 0) + cents
    ids = dict(
        ProlificSubmission.objects.filter(link=link, prolific_pid__in=lines).values_list(
            "prolific_pid", "submission_id"
        )
    )
    try:
        if set(lines) - set(ids):
            for item in client.submissions(link.prolific_study_id):
                pid = str(item.get("participant_id") or item.get("participant") or "")
                ids.setdefault(pid, item.get("id", ""))
        shown = {pid: client.submission_get(ids[pid]).get("bonus_payments") for pid in lines if ids.get(pid)}
    except ProlificError as exc:
        log.warning("prolific: bonus batch %s: submissions not read back: %s", batch.pk, exc)
        return "unread"
    paid = unpaid = 0
    for pid, cents in lines.items():
        payments = shown.get(pid)
        if not isinstance(payments, list):
            return "unclear"
        try:
            total = sum(int(Decimal(str(payment))) for payment in payments)
        except InvalidOperation:
            return "unclear"
        if total == before.get(pid, 0) + cents:
            paid += 1
        elif total == before.get(pid, 0):
            unpaid += 1
        else:
            return "unclear"
    return "paid" if not unpaid else "unpaid" if not paid else "partly"


def _reconcile(batch: BonusBatch, client: ProlificClient) -> bool:
    """A batch left PAYING: reads its status on Prolific. Returns whether it is now known to be paid."""
    paying = BonusBatch.objects.filter(pk=batch.pk, state=BonusBatch.State.PAYING)
    try:
        answer = client.bonus_get(batch.prolific_bulk_id)
    except ProlificError as exc:
        if exc.transient:  # no answer: the next run asks again
            log.warning("prolific: bonus batch %s status unknown: %s", batch.pk, exc)
            paying.update(last_error=str(exc)[:500])
            return False
        answer = {"status": f"HTTP {exc.status}"}
    status = str(answer.get("status", "")).upper()
    if status in PAID_STATUSES:
        return bool(paying.update(state=BonusBatch.State.PAID, paid_at=timezone.now(), last_error=""))
    if status in UNPAID_STATUSES:  # Prolific says it is not paid: pay it
        paying.update(state=BonusBatch.State.SET_UP)
        return False
    told = _from_submissions(batch, client)
    if told == "paid":
        return bool(
            paying.update(
                state=BonusBatch.State.PAID,
                paid_at=timezone.now(),
                last_error="Paid: every line shows in the participants' bonus payments on Prolific.",
            )
        )
    called = batch.pay_claimed_at or batch.created_at
    if told == "unread" or (told in ("unpaid", "partly") and timezone.now() - called < PAYMENT_LAG):
        # Prolific pays asynchronously: lines not shown yet may still come. The next run reads again.
        paying.update(
            last_error=f"Waiting for Prolific to show these bonuses on the submissions ({told}); checking again."
        )
        return False
    explain = {
        "unpaid": f"none of its lines shows on the submissions {PAYMENT_LAG_MINUTES} minutes after the pay call",
        "partly": "only some of its lines show on the submissions",
        "unclear": "a participant's bonuses on Prolific match neither paid nor unpaid (a bonus paid another way?)",
    }[told]
    paying.update(
        state=BonusBatch.State.CHECK,
        last_error=(
            f"Prolific does not say whether bulk bonus {batch.prolific_bulk_id} was paid: {explain}. Look at the "
            "study's bonuses on Prolific, then choose Paid or Not paid."
        )[:500],
    )
    return False


def _pay_calls_over(link: ProlificStudy):
    """The study's batches left PAYING whose pay call is over (see the module's docstring): an unknown outcome
    recorded (`last_error`), or claimed longer ago than one attempt can last (its worker died mid-call)."""
    longest = timedelta(seconds=2 * settings.PROLIFIC_TIMEOUT_SECONDS + 60)  # connect and read, and a margin
    return BonusBatch.objects.filter(link=link, state=BonusBatch.State.PAYING).filter(
        ~Q(last_error="") | Q(pay_claimed_at=None) | Q(pay_claimed_at__lt=timezone.now() - longest)
    )


def bonuses_pay(*, link: ProlificStudy, client: ProlificClient | None = None) -> PayReport:
    """Pays every granted, unpaid bonus of the study, exactly once (see the module's docstring). Safe to
    call concurrently and repeatedly."""
    client = client or ProlificClient.for_link(link)
    report = PayReport()
    for batch in _pay_calls_over(link).select_related("link"):
        report.reconciled += _reconcile(batch, client)
    unbatched = set(
        Bonus.objects.filter(link=link, batch__isnull=True).values_list("prolific_pid", flat=True)
    )
    if unbatched:
        on_prolific = {
            str(item.get("participant_id") or item.get("participant") or "")
            for item in client.submissions(link.prolific_study_id)
        }
        report.held_pids = sorted(unbatched - on_prolific)
        _batch_gather(link, on_prolific)
    for batch in BonusBatch.objects.filter(link=link, state=BonusBatch.State.NEW).select_related("link"):
        _set_up(batch, client)
    for batch in BonusBatch.objects.filter(link=link, state=BonusBatch.State.SET_UP).select_related("link"):
        if _pay(batch, client):
            report.paid_batches += 1
            report.paid_bonuses += batch.bonuses.count()
    states = BonusBatch.objects.filter(link=link)
    report.pending = states.filter(state__in=OPEN_STATES).count()
    report.refused = states.filter(state=BonusBatch.State.REFUSED).count()
    report.to_check = states.filter(state=BonusBatch.State.CHECK).count()
    return report


def bonus_batch_decide(*, batch: BonusBatch, paid: bool) -> str:
    """The researcher's decision on a batch Prolific did not settle, after looking at the study's bonuses on
    Prolific: `paid` marks a CHECK batch PAID; not paid releases a batch that was never paid (NEW, SET_UP,
    REFUSED or CHECK) — its bonuses go back to be paid in a new batch, ids Prolific does not list held back.
    A PAYING batch (its call may still be in flight) or a PAID one is refused. Returns what was done."""
    S = BonusBatch.State
    with transaction.atomic():
        locked = BonusBatch.objects.select_for_update().get(pk=batch.pk)
        if paid:
            if locked.state != S.CHECK:
                raise BonusError(
                    f"Only a batch to check can be marked paid (this one is {locked.get_state_display()})."
                )
            BonusBatch.objects.filter(pk=locked.pk).update(
                state=S.PAID, paid_at=timezone.now(), last_error="Marked paid by the researcher."
            )
            return f"Batch {locked.pk} marked paid."
        if locked.state not in (S.NEW, S.SET_UP, S.REFUSED, S.CHECK):
            raise BonusError(
                f"Batch {locked.pk} is {locked.get_state_display().lower()}: it cannot be released "
                "(a payment may be under way or done)."
            )
        released = Bonus.objects.filter(batch=locked).update(batch=None)
        BonusBatch.objects.filter(pk=locked.pk).update(
            state=S.RELEASED, last_error="Released by the researcher: its bonuses go into the next payment."
        )
    return f"Batch {locked.pk} released: {released} bonus(es) will be paid in the next payment."
