"""Models of the benchmark targets."""

from django.db import models


class FloorWrite(models.Model):
    """One row per request to the benchmark floor view (`bench.targets.views.floor_write`): the cheapest write
    the stack can do, against which `bench/participants.py` measures the participant flow."""

    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"floor write {self.pk}"
