"""Models of the analysis app: the analysts' API tokens."""

from django.conf import settings
from django.db import models

from studies.models import Study


class AnalystToken(models.Model):
    """An API token for an analyst, stored as its SHA-256 only (the key is shown once, when issued), with an
    expiry and an optional study it is limited to (analysis.tokens has the rules)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="analyst_tokens"
    )
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=8, help_text="The key's first characters, to tell tokens apart.")
    study = models.ForeignKey(
        Study,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="analyst_tokens",
        help_text="Blank: every study that is not a draft.",
    )
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        scope = self.study.slug if self.study_id else "all studies"
        return f"{self.user} {self.prefix}… ({scope}, until {self.expires_at:%Y-%m-%d})"


class ExportFile(models.Model):
    """One export of a study written to a file by a worker (analysis/export_files.py), for a study too large to
    stream within a request: its state, and once ready its rows and size. The file's bytes are its `parts`, in
    the database, so every replica serves it and production needs no file storage."""

    class State(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "being written"
        READY = "ready", "ready"
        FAILED = "failed", "failed"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="export_files")
    what = models.CharField(max_length=40)
    no_exclusions = models.BooleanField(default=False)
    pseudonymised = models.BooleanField(default=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    rows = models.BigIntegerField(null=True, blank=True)
    size = models.BigIntegerField(default=0)
    error = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-requested_at", "-pk"]
        constraints = [
            # At most one file of the same export being prepared: a second request joins the first.
            models.UniqueConstraint(
                fields=["study", "what", "no_exclusions", "pseudonymised"],
                condition=models.Q(state__in=["queued", "running"]),
                name="export_file_one_in_progress",
            )
        ]

    def __str__(self) -> str:
        return f"{self.study.slug} {self.what}.csv ({self.get_state_display()})"


class ExportFilePart(models.Model):
    """A piece of an export file's bytes, in order of `index`."""

    file = models.ForeignKey(ExportFile, on_delete=models.CASCADE, related_name="parts")
    index = models.PositiveIntegerField()
    data = models.BinaryField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["file", "index"], name="export_file_part_unique")]

    def __str__(self) -> str:
        return f"part {self.index} of export file {self.file_id}"
