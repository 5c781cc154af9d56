"""Prolific's side of a study: the link to the Prolific study, Prolific's view of each participant, the
webhook events received, and bonuses with their local idempotency record.

Our own participant lifecycle (statuses, slots, items) stays in `studies/`; these rows only mirror what
Prolific says and remember which of our calls to Prolific already happened, so nothing is done twice.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from studies.models import Participant, Study


def env_var_name_validate(value: str) -> None:
    """The NAME of an environment variable, never a token: letters, digits and underscores, not starting
    with a digit, and starting with settings.RECRUITING_SECRET_PREFIX (PROLIFIC_): a provider's key may never
    have that prefix (generation.keys), so the recruiting credential can never be sent to an LLM endpoint."""
    if not value or not value.replace("_", "a").isalnum() or value[0].isdigit() or not value.isascii():
        raise ValidationError(
            "Give the NAME of an environment variable (letters, digits, underscores), e.g. PROLIFIC_TOKEN — "
            "never the token itself."
        )
    if not value.upper().startswith(settings.RECRUITING_SECRET_PREFIX):
        raise ValidationError(
            f"The recruiting credentials' variables start with {settings.RECRUITING_SECRET_PREFIX} (e.g. "
            "PROLIFIC_TOKEN), so that no provider can ever name them as its API key."
        )


class Device(models.TextChoices):
    DESKTOP = "desktop", "Desktop"
    TABLET = "tablet", "Tablet"
    MOBILE = "mobile", "Mobile"


def default_devices() -> list[str]:
    return [Device.DESKTOP, Device.TABLET, Device.MOBILE]


class ProlificStudy(models.Model):
    """One of our studies run on Prolific (one-to-one)."""

    class State(models.TextChoices):
        # Prolific's study statuses (study.status.change), plus NOT_CREATED before our first call.
        NOT_CREATED = "NOT_CREATED", "Not created on Prolific yet"
        UNPUBLISHED = "UNPUBLISHED", "Draft on Prolific"
        SCHEDULED = "SCHEDULED", "Scheduled"
        PUBLISHING = "PUBLISHING", "Publishing"
        ACTIVE = "ACTIVE", "Active"
        PAUSED = "PAUSED", "Paused"
        AWAITING_REVIEW = "AWAITING REVIEW", "Awaiting review"
        COMPLETED = "COMPLETED", "Completed"

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="prolific")
    prolific_study_id = models.CharField(max_length=64, blank=True, db_index=True)
    token_env = models.CharField(
        max_length=100,
        validators=[env_var_name_validate],
        default="PROLIFIC_TOKEN",
        verbose_name="API token environment variable",
        help_text="The NAME of the environment variable that holds the Prolific API token, used when no token "
        "is typed below (a typed one is stored encrypted).",
    )
    webhook_secret_env = models.CharField(
        max_length=100,
        validators=[env_var_name_validate],
        default="PROLIFIC_WEBHOOK_SECRET",
        verbose_name="Webhook secret environment variable",
        help_text="The NAME of the environment variable that holds the workspace's webhook secret.",
    )
    site_url = models.URLField(
        max_length=300, help_text="The public https address of this site, e.g. https://studies.example.org"
    )
    prolific_name = models.CharField(max_length=200, help_text="The study's name as participants see it.")
    prolific_description = models.TextField(
        help_text="What participants read on Prolific before taking part."
    )
    reward = models.PositiveIntegerField(
        validators=[MinValueValidator(1)], help_text="Reward per submission in pence (or cents)."
    )
    estimated_minutes = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    devices = models.JSONField(default=default_devices, help_text="Any of desktop, tablet, mobile.")
    auto_approve = models.BooleanField(
        default=False,
        help_text="Approve, in bulk, submissions awaiting review whose participant completed here with "
        "their attention checks passed. Failed checks are always left to you.",
    )
    bonus_flagged = models.BooleanField(
        default=False,
        verbose_name="Bonus flagged participants",
        help_text="Grant the per-rating bonus to participants flagged for exclusion (failed attention checks) "
        "too. Off: they get none unless you add them by CSV.",
    )
    workspace_id = models.CharField(
        max_length=64,
        blank=True,
        help_text="Your Prolific workspace's id (in the app's address when the workspace is open): needed to "
        "subscribe this site to Prolific's webhooks from here.",
    )
    token_sealed = models.TextField(
        blank=True,
        editable=False,
        help_text="The API token typed in the admin, encrypted with the address of Prolific's API it may go to "
        "(studies.sealed); used instead of the environment variable when set, never shown again.",
    )
    filters = models.JSONField(
        default=list,
        blank=True,
        help_text="Prolific's audience filters (prescreeners), in Prolific's shape: sent when the study is created.",
    )
    state = models.CharField(max_length=20, choices=State.choices, default=State.NOT_CREATED)
    state_at = models.DateTimeField(null=True, blank=True)
    places = models.PositiveIntegerField(default=0, help_text="Places last sent to Prolific.")
    last_synced_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "Prolific study"
        verbose_name_plural = "Prolific studies"

    def __str__(self) -> str:
        return f"{self.study.slug} on Prolific ({self.prolific_study_id or 'not created'})"

    def clean(self) -> None:
        unknown = set(self.devices or []) - set(Device.values)
        if not self.devices or unknown:
            raise ValidationError({"devices": f"Choose among {', '.join(Device.values)}."})


class SubmissionStatus(models.TextChoices):
    RESERVED = "RESERVED", "Reserved"
    ACTIVE = "ACTIVE", "Active"
    TIMED_OUT = "TIMED-OUT", "Timed out"
    AWAITING_REVIEW = "AWAITING REVIEW", "Awaiting review"
    RETURNED = "RETURNED", "Returned"
    SCREENED_OUT = "SCREENED OUT", "Screened out"
    APPROVED = "APPROVED", "Approved"
    REJECTED = "REJECTED", "Rejected"
    PARTIALLY_APPROVED = "PARTIALLY APPROVED", "Partially approved"


class ProlificSubmission(models.Model):
    """Prolific's view of one participant of a linked study, beside ours (`participant`)."""

    link = models.ForeignKey(ProlificStudy, on_delete=models.CASCADE, related_name="submissions")
    submission_id = models.CharField(max_length=64, unique=True)
    prolific_pid = models.CharField(max_length=128)
    participant = models.OneToOneField(
        Participant, null=True, blank=True, on_delete=models.SET_NULL, related_name="prolific_submission"
    )
    status = models.CharField(max_length=20, choices=SubmissionStatus.choices)
    status_at = models.DateTimeField(
        null=True, blank=True, help_text="When Prolific says the status changed."
    )
    last_event_id = models.CharField(max_length=100, blank=True)
    # Our calls: set by the worker that claimed the call (a conditional UPDATE), so two never make it.
    approval_claimed_at = models.DateTimeField(null=True, blank=True)
    # Set when the approval call's outcome is unknown (no answer, a 5xx) and the read-back has not settled it:
    # the scheduled reconciliation reads the submission's status and sends it once more if still awaiting.
    approval_unknown_at = models.DateTimeField(null=True, blank=True)
    # Set when Prolific accepted the approval (a 2xx): its status follows by webhook or reconciliation.
    approval_accepted_at = models.DateTimeField(null=True, blank=True)
    rejection_claimed_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(null=True, blank=True, help_text="When our slot and items were freed.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["link", "prolific_pid"], name="prolific_submission_unique_pid"),
        ]

    def __str__(self) -> str:
        return f"{self.prolific_pid}: {self.status}"


class WebhookEvent(models.Model):
    """Every webhook delivery we accepted, once per event id and once per signature: a redelivery or a replay
    finds the row and adds nothing."""

    event_id = models.CharField(max_length=100, unique=True)
    # SHA-256 of Prolific's signature (which covers the request's timestamp and body): a replay carries the same.
    signature_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    link = models.ForeignKey(ProlificStudy, on_delete=models.CASCADE, related_name="events")
    event_type = models.CharField(max_length=64)
    resource_id = models.CharField(max_length=64)
    body = models.JSONField()
    event_time = models.DateTimeField(
        null=True, blank=True, help_text="X-Timestamp: when the event happened."
    )
    received_at = models.DateTimeField(auto_now_add=True)
    deliveries = models.PositiveIntegerField(default=1)
    processed_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=200, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["processed_at"], name="webhookevent_unprocessed", condition=Q(processed_at=None)
            )
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.resource_id} ({self.event_id})"


class BonusBatch(models.Model):
    """One bulk bonus on Prolific: set up (Prolific returns its id), then paid.

    Prolific's pay call is not idempotent, so `state` moves forward by conditional UPDATEs only:
    NEW → SET_UP (id stored) → PAYING (one worker claimed the pay call) → PAID. A batch left in PAYING (the
    call failed or timed out, maybe after it succeeded) is never paid again blindly: reconciliation reads
    the bulk bonus's status on Prolific first, and when Prolific does not say (CHECK) the researcher decides.
    A batch Prolific refused to set up is REFUSED; the researcher can release a batch that was never paid
    (RELEASED: its bonuses go back to be paid in a new batch). See recruiting.bonuses."""

    class State(models.TextChoices):
        NEW = "new", "New"
        SET_UP = "set_up", "Set up on Prolific"
        PAYING = "paying", "Pay call made, outcome unknown"
        CHECK = "check", "Paid? Check on Prolific and decide"
        REFUSED = "refused", "Refused by Prolific"
        RELEASED = "released", "Released (bonuses back to pay)"
        PAID = "paid", "Paid"

    link = models.ForeignKey(ProlificStudy, on_delete=models.CASCADE, related_name="bonus_batches")
    state = models.CharField(max_length=16, choices=State.choices, default=State.NEW, db_index=True)
    prolific_bulk_id = models.CharField(max_length=64, blank=True)
    csv = models.TextField(help_text="participant_id,amount lines as sent to Prolific.")
    pay_claimed_at = models.DateTimeField(null=True, blank=True)
    paid_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "bonus batches"

    def __str__(self) -> str:
        return f"bonus batch {self.pk} ({self.state})"


class Bonus(models.Model):
    """A bonus owed to one participant for one reason. The unique key (study, participant, reason) makes a
    second grant for the same reason impossible; the batch records whether it was paid."""

    link = models.ForeignKey(ProlificStudy, on_delete=models.CASCADE, related_name="bonuses")
    prolific_pid = models.CharField(max_length=128)
    reason = models.CharField(max_length=100)
    amount = models.DecimalField(max_digits=8, decimal_places=2, validators=[MinValueValidator(0.01)])
    batch = models.ForeignKey(
        BonusBatch, null=True, blank=True, on_delete=models.PROTECT, related_name="bonuses"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "bonuses"
        constraints = [
            models.UniqueConstraint(fields=["link", "prolific_pid", "reason"], name="bonus_unique_reason"),
            models.CheckConstraint(condition=Q(amount__gt=0), name="bonus_amount_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.prolific_pid} {self.amount} ({self.reason})"
