"""The chat kind's tables: its settings (frozen with the design), one conversation per participant, its turns
(every one stored before it is shown) and the rating that follows the conversation (PETS and the study's scale)."""

from __future__ import annotations

from django.conf import settings as django_settings
from django.core.validators import MinValueValidator
from django.db import models

from generation.live_models import LiveCall
from generation.models import Provider
from studies.models import Condition, Participant, Situation, Study


def default_chat_scale() -> list[dict]:
    return [{"value": 2, "label": "Good"}, {"value": 1, "label": "Okay"}, {"value": 0, "label": "Bad"}]


DEFAULT_SUPPORT_RESOURCES = """If you are in danger now, call your local emergency number (112 in Europe, 911 in North America, 999 in the UK).
Find a free, confidential helpline in your country: https://findahelpline.com
United States: call or text 988 (Suicide & Crisis Lifeline).
United Kingdom and Ireland: Samaritans, call 116 123, free at any time."""


def default_support_resources() -> str:
    return DEFAULT_SUPPORT_RESOURCES


def default_labels() -> list[str]:
    return ["ai", "person"]


class Label(models.TextChoices):
    """Who the participant is told answers them (the second factor, independent of the source)."""

    AI = "ai", "an AI"
    PERSON = "person", "a person"
    NONE = "none", "(not said)"


class ChatSettings(models.Model):
    """One chat study's design (frozen with the study's design at launch)."""

    class Opening(models.TextChoices):
        CORPUS = "corpus", "A situation from the study's corpus"
        OWN = "own", "The participant writes their own"
        EITHER = "either", "Either: the participant chooses"

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="chat_settings")
    opening = models.CharField(max_length=8, choices=Opening.choices, default=Opening.CORPUS)
    min_turns = models.PositiveSmallIntegerField(
        default=3, validators=[MinValueValidator(1)], help_text="Participant messages before they may stop."
    )
    max_turns = models.PositiveSmallIntegerField(
        default=6, validators=[MinValueValidator(1)], help_text="Participant messages at most."
    )
    min_chars = models.PositiveSmallIntegerField(default=10, help_text="Characters a message, at least.")
    max_chars = models.PositiveSmallIntegerField(
        default=1000, validators=[MinValueValidator(1)], help_text="Characters a message, at most."
    )
    min_reply_wait_ms = models.PositiveIntegerField(
        default=1500, help_text="A reply never appears sooner than this after the message was sent (ms)."
    )
    labels = models.JSONField(
        default=default_labels,
        help_text='The label levels shown, crossed with the source: any of "ai", "person", "none".',
    )
    debrief_text = models.TextField(
        blank=True, help_text="Shown after the rating; required when a label can mislead (the launch checks)."
    )
    scale_question = models.CharField(
        max_length=300, default="Overall, how empathetic was the conversation partner?"
    )
    scale = models.JSONField(
        default=default_chat_scale, help_text="List of {value, label}, shown in this order."
    )
    ask_free_text = models.BooleanField(
        default=True, help_text="An optional free-text comment after the rating."
    )
    fallback_condition = models.ForeignKey(
        Condition,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="An LLM condition that answers when the source fails, times out or the budget is spent.",
    )
    token_cap_per_participant = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Tokens (in + out) one participant's conversation may use; blank: no cap.",
    )
    budget_usd = models.DecimalField(
        max_digits=10,
        decimal_places=2,
        null=True,
        blank=True,
        help_text="The study's spend on replies, at most.",
    )
    person_reply_seconds = models.PositiveIntegerField(
        default=180, validators=[MinValueValidator(10)], help_text="A person responder's time limit a reply."
    )
    support_resources = models.TextField(
        default=default_support_resources,
        help_text="Shown when a participant's message names a crisis: one resource a line (addresses become links).",
    )
    moderation_provider = models.ForeignKey(
        Provider,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Its moderation endpoint checks every message and reply beside the crisis-term list; blank: "
        "the list alone.",
    )

    def __str__(self) -> str:
        return f"chat settings of {self.study}"


class Conversation(models.Model):
    """One participant's conversation: its source (the participant's condition), the label shown, the opening."""

    class State(models.TextChoices):
        OPEN = "open", "Open: the participant's turn"
        AWAITING = "awaiting", "Awaiting the reply"
        ENDED = "ended", "Ended"
        ENDED_CRISIS = "ended_crisis", "Ended by the participant after the crisis resources"

    class OpeningSource(models.TextChoices):
        CORPUS = "corpus", "From the corpus"
        OWN = "own", "Written by the participant"

    participant = models.OneToOneField(Participant, on_delete=models.CASCADE, related_name="conversation")
    condition = models.ForeignKey(
        Condition,
        on_delete=models.PROTECT,
        related_name="conversations",
        help_text="The source (an LLM or a person).",
    )
    label = models.CharField(max_length=8, choices=Label.choices)
    situation = models.ForeignKey(
        Situation, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    opening_source = models.CharField(max_length=8, choices=OpeningSource.choices, blank=True)
    opening_text = models.TextField(blank=True, help_text="The situation as the participant saw or wrote it.")
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN, db_index=True)
    fallback_used = models.BooleanField(
        default=False, help_text="The fallback condition answered at least once."
    )

    class ClosedBy(models.TextChoices):
        BUDGET = "budget", "The study's budget was spent"
        TOKEN_CAP = "token_cap", "The participant's token cap was reached"

    crisis_shown_at = models.DateTimeField(
        null=True, blank=True, help_text="When the support resources were first shown."
    )
    crisis_count = models.PositiveSmallIntegerField(
        default=0, help_text="Participant messages that showed the support resources."
    )
    crisis_open = models.BooleanField(
        default=False,
        help_text="The support resources are shown and the participant has not yet chosen to go on or end.",
    )
    closed_by = models.CharField(
        max_length=12,
        choices=ClosedBy.choices,
        blank=True,
        help_text="Why the platform closed the conversation early (blank: it did not).",
    )
    tokens_used = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=8, default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    opened_at = models.DateTimeField(null=True, blank=True, help_text="When the opening was settled.")
    ended_at = models.DateTimeField(null=True, blank=True)
    debriefed_at = models.DateTimeField(null=True, blank=True, help_text="When the debrief was read.")

    class Meta:
        indexes = [models.Index(fields=["condition", "label"], name="chat_conversation_cell")]

    def __str__(self) -> str:
        return f"conversation of {self.participant_id} ({self.condition_id}, {self.label})"


class Turn(models.Model):
    """One message of a conversation, stored before it is shown: the participant's before any model call; a
    reply's row (pending) before its stream starts, completed when it ends. A reply row the platform completes
    without a model, because a spending limit closed the conversation, has no text, no condition and the limit's
    name as its finish reason (`CLOSE_REASONS`)."""

    #: finish_reason of a closing row -> Conversation.closed_by (the names generation/budget.py's errors give).
    CLOSE_REASONS = {"budget_spent": "budget", "token_cap": "token_cap"}

    class Role(models.TextChoices):
        PARTICIPANT = "participant", "Participant"
        RESPONDER = "responder", "Responder (model or person)"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending (the reply is on its way)"
        COMPLETE = "complete", "Complete"
        FAILED = "failed", "Failed (replaced by a retry or the fallback)"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    index = models.PositiveSmallIntegerField(help_text="0-based position in the conversation.")
    role = models.CharField(max_length=12, choices=Role.choices)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.COMPLETE)
    text = models.TextField(blank=True)
    condition = models.ForeignKey(
        Condition, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="Who answered (the source, or the fallback); blank for the participant's turns.",
    )  # fmt: skip
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Provider calls made for this reply.")
    claimed_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="A pending reply is being produced by one request until then (its lease).",
    )
    sent_at = models.DateTimeField(help_text="Participant: when sent. Reply: when asked for.")
    first_token_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    shown_at = models.DateTimeField(
        null=True, blank=True, help_text="When the reply was first shown in full."
    )
    model = models.CharField(max_length=200, blank=True, help_text="The model returned (or asked for).")
    settings = models.JSONField(
        default=dict, blank=True, help_text="Decoding settings (temperature, top_p, …)."
    )
    prompt = models.JSONField(
        null=True, blank=True, help_text="The full request: system prompt and messages."
    )
    seed = models.BigIntegerField(null=True, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost = models.DecimalField(max_digits=14, decimal_places=8, default=0)
    finish_reason = models.CharField(max_length=64, blank=True)
    safety = models.JSONField(
        default=dict, blank=True, help_text="The safety check's result (kinds/chat/safety.py)."
    )
    live_call = models.ForeignKey(
        LiveCall, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    responder = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The person who typed the reply (a person source).",
    )  # fmt: skip
    error = models.TextField(blank=True, help_text="The last failed attempt's error.")

    class Meta:
        ordering = ["conversation", "index"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "index"], name="chat_turn_unique_index"),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}#{self.index} {self.role}"

    @property
    def closes_conversation(self) -> bool:
        """The platform's closing row (no model asked): shown as a note, not as the partner's words."""
        return self.condition_id is None and self.finish_reason in self.CLOSE_REASONS


class ChatRating(models.Model):
    """The rating after the conversation: the PETS items (0–100), the study's scale, optional free text."""

    conversation = models.OneToOneField(Conversation, on_delete=models.CASCADE, related_name="rating")
    pets = models.JSONField(help_text="PETS item key -> 0..100.")
    pets_order = models.JSONField(default=list, help_text="The item keys in the order shown.")
    pets_er = models.FloatField(help_text="Emotional Responsiveness: the mean of its items (0–100).")
    pets_ut = models.FloatField(help_text="Understanding & Trust: the mean of its items (0–100).")
    scale_value = models.SmallIntegerField()
    free_text = models.TextField(blank=True)
    response_time_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"rating of {self.conversation_id}"


class ResponderClaim(models.Model):
    """A person responder's hold on one pending reply of a person source (kinds/chat/console.py): taken from the
    queue by one responder only (the turn is unique here, and taken under SELECT … FOR UPDATE SKIP LOCKED), until
    they reply, give it back (the row is deleted) or the study's time limit a reply passes (the fallback answers)."""

    turn = models.OneToOneField(Turn, on_delete=models.CASCADE, related_name="claim")
    responder = models.ForeignKey(django_settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    claimed_at = models.DateTimeField()

    class Meta:
        permissions = [("respond", "Can answer participants at the responder console")]

    def __str__(self) -> str:
        return f"turn {self.turn_id} claimed by {self.responder_id}"
