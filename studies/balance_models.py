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
