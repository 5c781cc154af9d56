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
