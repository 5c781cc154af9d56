"""What every record of a Batch API submission keeps (a condition's generation batch, a judge's batch): the
provider's ids and status, the cost at the batch price, what went wrong, who started it and when. Abstract; kept
apart from the models so generation/models.py and generation/judge_models.py share it without importing each
other."""

from django.db import models


class BatchRecord(models.Model):
    class Status(models.TextChoices):
        PREPARING = "preparing", "Preparing"
        SUBMITTED = "submitted", "Submitted"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PREPARING)
    provider_status = models.CharField(max_length=32, blank=True, help_text="The provider's own status.")
    provider_batch_id = models.CharField(max_length=200, blank=True)
    input_file_id = models.CharField(max_length=200, blank=True)
    output_file_id = models.CharField(max_length=200, blank=True)
    error_file_id = models.CharField(max_length=200, blank=True)
    cost = models.DecimalField(
        max_digits=14, decimal_places=8, default=0, help_text="USD, at the batch price."
    )
    error = models.TextField(blank=True)
    started_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at"]
