"""Provenance of EmotionBench LLM subjects: every exchange with the model, answered or not."""

from django.db import models

from studies.models import Condition, QuestionnaireRun, Situation


class QuestionnaireExchange(models.Model):
    """One request to a model for one questionnaire run slot, and what came back.

    A slot is (condition, phase, situation, run_index). Its exchanges are numbered; the one whose reply parsed is
    linked to the QuestionnaireRun it produced. Failed parses, provider errors and re-asks are kept.
    """

    class Outcome(models.TextChoices):
        PARSED = "parsed", "Parsed"
        UNPARSEABLE = "unparseable", "Reply could not be parsed"
        PROVIDER_ERROR = "provider_error", "Provider error"

    condition = models.ForeignKey(Condition, on_delete=models.CASCADE, related_name="questionnaire_exchanges")
    phase = models.CharField(max_length=8, choices=QuestionnaireRun.Phase.choices)
    situation = models.ForeignKey(
        Situation, null=True, blank=True, on_delete=models.PROTECT, related_name="questionnaire_exchanges"
    )
    run_index = models.PositiveIntegerField()
    attempt = models.PositiveSmallIntegerField()
    run = models.ForeignKey(
        QuestionnaireRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="exchanges"
    )
    item_order = models.JSONField(default=list, help_text="Item numbers in the order the model saw them.")
    request = models.JSONField(help_text="The exact request body sent (no headers, so no key).")
    reply_text = models.TextField(blank=True)
    raw_response = models.JSONField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    error = models.TextField(blank=True)
    model_returned = models.CharField(max_length=200, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "generation"
        ordering = ["condition", "phase", "situation", "run_index", "attempt"]
        indexes = [models.Index(fields=["condition", "phase", "run_index"], name="qexchange_slot")]

    def __str__(self) -> str:
        return f"{self.condition} {self.phase} #{self.run_index} try {self.attempt}: {self.outcome}"
