"""Each participant's flags under their study's declared exclusion rules, stored for the live status page
(studies/declared_flags.py keeps them)."""

from __future__ import annotations

from django.db import models


class DeclaredFlags(models.Model):
    """A participant whom their study's declared exclusion rules exclude, with those rules in words, as the
    kind's `exclusion_flags` (the analysis's own computation) gave them when last computed. A participant with
    no row is kept, or has no counted rating yet. Plain ids, no foreign keys: a refresh writing here never waits
    on the participant's row, which their answer holds locked while it marks them stale (a deadlock otherwise);
    the readers join the participants that exist."""

    participant_id = models.BigIntegerField(primary_key=True)
    study_id = models.BigIntegerField(db_index=True)
    rules = models.JSONField(default=list)

    def __str__(self) -> str:
        return f"{self.participant_id}: {', '.join(self.rules)}"


class FlagsStale(models.Model):
    """A participant whose flags may have changed since they were last stored: a database trigger writes (or
    renews) the row when anything the rules read changes (a rating written, changed or deleted; the
    participant's status, attention-check failures, attention flag or preview mark; their authenticity verdict;
    the study's declared rules). `seq` grows with every mark, so a reader deletes only the marks it read.
    Plain ids, no foreign keys: a mark may outlive the participant it names (deleted in the same transaction)."""

    participant_id = models.BigIntegerField(primary_key=True)
    study_id = models.BigIntegerField(db_index=True)
    seq = models.BigIntegerField()

    def __str__(self) -> str:
        return f"{self.participant_id} stale since mark {self.seq}"
