"""What enrolment deals by, kept by the database: a response's live assignments (migration 0010) and a
condition's completed participants (migration 0016)."""

from django.db import models


class ResponseTally(models.Model):
    """How many pages of non-preview participants show the response: written only by the triggers on
    `studies_assignment` (migration 0010), in the transaction that adds or deletes the pages, and read by
    enrolment (studies/kinds/rating.py) to give a newcomer the least assigned responses.

    Every response has one from the moment it exists (triggers on `studies_response`, migration 0018), with
    whether it may be dealt (`eligible`: sample 0, not flagged) and its condition kept in step with the
    response, so that the enrolment statement deals from the tallies alone, through `responsetally_deal`.

    A table of its own, not a column of Response: saving a Response (an admin reviewing it during a launch)
    writes every column back, and would put back a count read before the enrolments since."""

    response = models.OneToOneField(
        "studies.Response", on_delete=models.CASCADE, primary_key=True, related_name="tally"
    )
    live_assignments = models.IntegerField(default=0)
    # The response's condition and whether it may be dealt, so that enrolment reads one condition's eligible
    # tallies, fewest pages first, through an index (migrations 0015, 0018; since 0019 `responsetally_deal_order`,
    # on PostgreSQL only, which orders each count's responses as the deal takes them).
    condition = models.ForeignKey(
        "studies.Condition", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    eligible = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"{self.response_id}: {self.live_assignments}"


class ConditionTally(models.Model):
    """How many non-preview participants of the condition have completed: written only by the triggers on
    `studies_participant` (PostgreSQL, migration 0016), in the transaction that changes a participant's status,
    and read by the enrolment statement (`rating_enrol_in_place`), which then counts only the condition's
    active participants instead of every participant it ever had. No row: none.

    PostgreSQL only, as the statement is: SQLite has neither, and there the table stays empty and unread (the
    Python path, `balancing.condition_choose`, counts participants itself on both)."""

    condition = models.OneToOneField(
        "studies.Condition", on_delete=models.CASCADE, primary_key=True, related_name="tally"
    )
    completed = models.IntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.condition_id}: {self.completed}"
