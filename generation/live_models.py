"""LiveCall: one "respond now" call (generation/live.py), made from a participant's request: who asked, the exact
request, the streamed reply's text and metadata, usage and cost, or the classified error."""

from __future__ import annotations

from django.db import models

from generation.call_records import ProviderCallRecord
from studies.models import Condition


class LiveCall(ProviderCallRecord):
    class Outcome(models.TextChoices):
        OK = "ok", "Answered"
        ERROR = "error", "Failed (see the error)"
        ABANDONED = "abandoned", "The reader stopped before the end"

    condition = models.ForeignKey(Condition, null=True, on_delete=models.SET_NULL, related_name="live_calls")
    context = models.JSONField(default=dict, blank=True, help_text="Who asked (participant, turn, …).")
    request = models.JSONField(help_text="The exact request body (no headers, so no key).")
    raw_response = models.JSONField(
        null=True, blank=True, help_text="What the provider said about the reply."
    )
    text = models.TextField(blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    error_kind = models.CharField(max_length=32, blank=True)
    error = models.TextField(blank=True)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    retry_after = models.FloatField(null=True, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost = models.DecimalField(
        max_digits=14, decimal_places=8, default=0, help_text="USD, at the provider's prices."
    )
    first_chunk_ms = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["condition", "started_at"], name="generation_livecall_cond")]

    def __str__(self) -> str:
        return f"{self.provider_name}/{self.model_requested}: {self.outcome}"
