"""The rating kind's models (kinds/rating/kind.py): the answer to one rating page.

`Rating` keeps the table it had when it lived in studies/models.py (`studies_rating`): its rows, keys and
constraints did not move, only the model's place (migrations/0001_rating_from_studies.py).
"""

from django.db import models

from studies.models import Assignment


class Rating(models.Model):
    """The answer to one Assignment. The OneToOne key makes a second answer impossible."""

    assignment = models.OneToOneField(Assignment, on_delete=models.CASCADE, related_name="rating")
    value = models.SmallIntegerField()
    response_time_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "studies_rating"

    def __str__(self) -> str:
        return f"{self.assignment} = {self.value}"
