"""A study's spending limits for calls made while a participant waits ("respond now", generation/live.py): a
budget in USD that concurrent conversations cannot overrun, and a cap on the tokens one participant's calls use.

Each call is *reserved* before it is sent — its maximum cost (`call_maximum`: the cautious input estimate at
the input price plus `max_tokens` at the output price) and its maximum tokens — and *settled* after it ends with
what the provider reported. Both happen in one short transaction holding the study's StudyBudget row lock, so:

* spent + reserved never exceeds the cap at any reservation; spend ends above the cap only when a reply cost more
  than its reservation (the provider reported more input tokens than the estimate), by less than one call's
  maximum;
* a participant's tokens (settled calls' actual tokens, held calls' maximum) never exceed the participant cap.

A refused reservation raises BudgetSpent or TokenCapReached (ProviderErrors, nothing sent, nothing stored): the
kind then finishes the conversation with its design's fallback, and `budget_admits` tells its entry page to show
the study's "full" page. A call whose process died holds its reservation until `budget_expire_stale` settles it at
its maximum (the provider may have billed it).

A study without a StudyBudget row has no limits. Nothing here talks to a provider.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.db import models, transaction
from django.db.models import Case, F, Sum, When
from django.utils import timezone

from generation.providers.base import PermanentProviderError, cost_compute, tokens_estimate
from studies.models import Study

#: A held reservation older than this is a call whose process died (respond now's timeout is at most 60 s).
STALE_AFTER = timedelta(minutes=10)


class BudgetSpent(PermanentProviderError):
    """The study's budget cannot cover one more call: nothing was sent."""

    def __init__(self, message: str):
        super().__init__("budget_spent", message)


class TokenCapReached(PermanentProviderError):
    """The participant's calls have used their token cap: nothing was sent."""

    def __init__(self, message: str):
        super().__init__("token_cap", message)


class StudyBudget(models.Model):
    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="spend_budget")
    cap = models.DecimalField(
        max_digits=12, decimal_places=4, null=True, blank=True,
        help_text="USD the study's live calls may spend in all (empty: no limit).",
    )  # fmt: skip
    participant_token_cap = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Tokens (in + out) one participant's calls may use (empty: no limit).",
    )
    reserved = models.DecimalField(max_digits=14, decimal_places=8, default=0, editable=False)
    spent = models.DecimalField(max_digits=14, decimal_places=8, default=0, editable=False)

    def __str__(self) -> str:
        return f"{self.study}: {self.spent} of {self.cap if self.cap is not None else 'no cap'}"

    @property
    def remaining(self) -> Decimal | None:
        return None if self.cap is None else self.cap - self.spent - self.reserved


class SpendReservation(models.Model):
    class State(models.TextChoices):
        HELD = "held", "Held (the call is under way)"
        SETTLED = "settled", "Settled at the reported cost"
        EXPIRED = "expired", "Its process died: settled at its maximum"

    budget = models.ForeignKey(StudyBudget, on_delete=models.CASCADE, related_name="reservations")
    participant = models.CharField(max_length=64, blank=True)
    max_cost = models.DecimalField(max_digits=14, decimal_places=8)
    max_tokens = models.PositiveIntegerField()
    cost = models.DecimalField(max_digits=14, decimal_places=8, null=True, blank=True)
    tokens = models.PositiveIntegerField(null=True, blank=True)
    state = models.CharField(max_length=8, choices=State.choices, default=State.HELD)
    created_at = models.DateTimeField(auto_now_add=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["budget", "participant"], name="generation_reserve_who"),
            models.Index(fields=["state", "created_at"], name="generation_reserve_held"),
        ]

    def __str__(self) -> str:
        return (
            f"{self.participant or '-'}: {self.state} {self.cost if self.cost is not None else self.max_cost}"
        )


@dataclass(frozen=True)
class CallMaximum:
    cost: Decimal
    tokens: int


def call_maximum(*, provider, system: str, messages: list[dict], max_tokens: int | None) -> CallMaximum:
    """The most one call may cost and use: the cautious estimate of its input, and `max_tokens` out."""
    out = int(max_tokens or 256)
    total = tokens_estimate(system=system, messages=messages, max_tokens=out)
    return CallMaximum(
        cost=cost_compute(provider=provider, usage_in=total - out, usage_out=out), tokens=total
    )


def budget_reserve(*, study_id: int, participant: str, maximum: CallMaximum) -> SpendReservation | None:
    """Hold `maximum` against the study's budget and the participant's cap (None: the study has no limits).
    Raises BudgetSpent / TokenCapReached when it does not fit. A study without limits costs one plain read."""
    if not StudyBudget.objects.filter(study_id=study_id).exists():
        return None
    with transaction.atomic():
        budget = StudyBudget.objects.select_for_update().filter(study_id=study_id).first()
        if budget is None:
            return None
        if budget.cap is not None and budget.spent + budget.reserved + maximum.cost > budget.cap:
            raise BudgetSpent(
                f"the study's budget (${budget.cap}) cannot cover another call: ${budget.spent:.4f} spent, "
                f"${budget.reserved:.4f} held by calls under way"
            )
        if budget.participant_token_cap is not None:
            used = participant_tokens(budget=budget, participant=participant)
            if used + maximum.tokens > budget.participant_token_cap:
                raise TokenCapReached(
                    f"participant {participant} has used {used} of {budget.participant_token_cap} tokens"
                )
        budget.reserved = F("reserved") + maximum.cost
        budget.save(update_fields=["reserved"])
        return SpendReservation.objects.create(
            budget=budget, participant=participant, max_cost=maximum.cost, max_tokens=maximum.tokens
        )


def participant_tokens(*, budget: StudyBudget, participant: str) -> int:
    """The tokens a participant's calls used (settled) or may use (held: their maximum)."""
    counted = Case(When(tokens__isnull=True, then=F("max_tokens")), default=F("tokens"))
    used = budget.reservations.filter(participant=participant).aggregate(n=Sum(counted))["n"]
    return int(used or 0)


def budget_settle(reservation: SpendReservation | None, *, cost: Decimal | None, tokens: int | None) -> None:
    """Replace the reservation by what the call cost (None: unknown, e.g. the reply was cut: its maximum is kept
    as spent). Settling twice changes nothing."""
    if reservation is None:
        return
    _settle(reservation.pk, cost=cost, tokens=tokens, state=SpendReservation.State.SETTLED)


def _settle(pk: int, *, cost: Decimal | None, tokens: int | None, state: str) -> bool:
    with transaction.atomic():
        held = SpendReservation.objects.filter(pk=pk).values_list("budget_id", flat=True).first()
        if held is None:
            return False
        StudyBudget.objects.select_for_update().filter(pk=held).values_list("pk", flat=True).get()
        reservation = SpendReservation.objects.get(pk=pk)
        if reservation.state != SpendReservation.State.HELD:
            return False
        reservation.cost = reservation.max_cost if cost is None else cost
        reservation.tokens = reservation.max_tokens if tokens is None else tokens
        reservation.state, reservation.settled_at = state, timezone.now()
        reservation.save(update_fields=["cost", "tokens", "state", "settled_at"])
        StudyBudget.objects.filter(pk=held).update(
            reserved=F("reserved") - reservation.max_cost, spent=F("spent") + reservation.cost
        )
        return True


def budget_expire_stale(*, older_than: timedelta = STALE_AFTER) -> int:
    """Settle at their maximum the reservations held longer than any live call lasts (their process died);
    how many."""
    cutoff = timezone.now() - older_than
    stale = SpendReservation.objects.filter(state=SpendReservation.State.HELD, created_at__lt=cutoff)
    return sum(
        _settle(pk, cost=None, tokens=None, state=SpendReservation.State.EXPIRED)
        for pk in stale.values_list("pk", flat=True)
    )


def budget_admits(study_id: int, *, need: Decimal = Decimal(0)) -> bool:
    """Whether the study can take a new participant: no budget, no cap, or more than `need` USD left (a kind
    passes what one conversation may cost; the "full" page otherwise)."""
    budget = StudyBudget.objects.filter(study_id=study_id).first()
    return budget is None or budget.remaining is None or budget.remaining > need


def budget_configure(*, study_id: int, cap: Decimal | None, participant_token_cap: int | None) -> StudyBudget:
    """Set the study's limits (a kind calls it when its design is frozen, from the design's own fields); what is
    spent and held is kept."""
    budget, _ = StudyBudget.objects.update_or_create(
        study_id=study_id, defaults={"cap": cap, "participant_token_cap": participant_token_cap}
    )
    return budget
