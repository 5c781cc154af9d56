"""Running totals the balance reads instead of counting rows (studies/balance_counts.py)."""

from __future__ import annotations

from django.db import models


class BalanceCount(models.Model):
    """One running total of a study, kept in the transaction that changes what it counts:

    * scope "condition", key a condition id: its non-preview participants who are active or completed;
    * scope an assignment kind ("response", "situation", ...), key the page's target id: the non-preview pages
      of that kind showing it that exist (a released participant keeps only answered pages).

    The balance rule (studies/balancing.py) subtracts from these the participants and pages of participants
    whose hold has lapsed but who are not released yet, which it finds by their index."""

    study = models.ForeignKey("studies.Study", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=16)
    key = models.BigIntegerField()
    count = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "scope", "key"], name="balancecount_unique_key"),
        ]

    def __str__(self) -> str:
        return f"{self.study_id} {self.scope} {self.key} = {self.count}"


class StatusTally(models.Model):
    """The live status page's counts of a study's non-preview participants, folded from `StatusDelta`
    (studies/status_tally.py), per condition (0: none yet):

    * `status` a participant status: those in that status, flagged or not for failed attention checks
      (`flagged`); `unauthentic` false;
    * `status` "" and `unauthentic` true: those whose authenticity verdict excludes them, whatever their status."""

    study_id = models.BigIntegerField()
    condition_id = models.BigIntegerField()
    status = models.CharField(max_length=16)
    flagged = models.BooleanField()
    unauthentic = models.BooleanField()
    n = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["study_id", "condition_id", "status", "flagged", "unauthentic"],
                name="statustally_unique_key",
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.study_id} {self.condition_id} {self.status} {self.flagged} {self.unauthentic} = {self.n}"
        )


class StatusDelta(models.Model):
    """One change to a `StatusTally`, appended by a database trigger in the transaction that enrols, moves or
    deletes a participant or changes their authenticity verdict (migration 0019): appending never waits on
    another transaction, where adding to one total row would make every completion in a condition queue."""

    study_id = models.BigIntegerField(db_index=True)
    condition_id = models.BigIntegerField()
    status = models.CharField(max_length=16)
    flagged = models.BooleanField()
    unauthentic = models.BooleanField()
    n = models.IntegerField()

    def __str__(self) -> str:
        return (
            f"{self.study_id} {self.condition_id} {self.status} {self.flagged} {self.unauthentic} {self.n:+d}"
        )
