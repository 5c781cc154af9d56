"""Models of the ratings app."""

from django.db import models


class FloorWrite(models.Model):
    """One row per request to the benchmark floor view (`ratings.floor`): the cheapest write the stack
    can do, against which `bench/participants.py` measures the participant flow. Empty in production."""

    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"floor write {self.pk}"
