"""The toy kind's answers: which hand a participant waved with, once."""

from django.db import models

from studies.models import Participant


class ToyWave(models.Model):
    class Hand(models.TextChoices):
        LEFT = "left", "Left"
        RIGHT = "right", "Right"

    participant = models.OneToOneField(Participant, on_delete=models.CASCADE, related_name="toy_wave")
    hand = models.CharField(max_length=5, choices=Hand.choices)
    waved_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.participant_id} waved {self.hand}"
