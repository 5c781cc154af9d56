"""The frozen design of a study (studies/design.py builds it): one StudyDesign row per version, the first
written at launch (or at the end of an import of a finished study), a new one with every StudyAmendment."""

from django.db import models


class StudyDesign(models.Model):
    """One version of a study's frozen design: canonical JSON and its SHA-256. The newest row is current."""

    study = models.ForeignKey("studies.Study", on_delete=models.CASCADE, related_name="designs")
    design = models.JSONField()
    canonical = models.TextField(help_text="The exact bytes hashed (UTF-8): sorted keys, no whitespace.")
    sha256 = models.CharField(max_length=64, db_index=True)
    reason = models.CharField(max_length=200, help_text="launch, import or amendment.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "-created_at", "-id"]
        get_latest_by = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.study.slug} design {self.sha256[:12]} ({self.reason})"


class StudyAmendment(models.Model):
    """A recorded change to a frozen field after launch: who, when, why, old → new, and the hashes."""

    study = models.ForeignKey("studies.Study", on_delete=models.CASCADE, related_name="amendments")
    field = models.CharField(max_length=100)
    old_value = models.JSONField(null=True)
    new_value = models.JSONField(null=True)
    reason = models.TextField()
    author = models.CharField(max_length=150)
    sha256_before = models.CharField(max_length=64)
    sha256_after = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "created_at", "id"]

    def __str__(self) -> str:
        return f"{self.study.slug}: {self.field} amended by {self.author}"
