"""The rating kind's models (kinds/rating/kind.py): its settings and the answer to one rating page.

`Rating` keeps the table it had when it lived in studies/models.py (`studies_rating`): its rows, keys and
constraints did not move, only the model's place (migrations/0001_rating_from_studies.py).
"""

from django.core.validators import MinValueValidator
from django.db import models

from studies.models import Assignment, Study


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


class RatingSettings(models.Model):
    """A rating study's own settings (one per study of that kind; `StudyKind.settings_model`), frozen with the
    design at launch (studies/design.py). A study without a row reads the defaults (`StudyKind.settings`)."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="rating_settings")
    scale_question = models.CharField(
        max_length=300,
        default="How empathetic is Speaker 2's response, compared with how you would have responded?",
    )
    ask_teq = models.BooleanField(
        default=False, verbose_name="Ask the Toronto Empathy Questionnaire before rating"
    )
    target_ratings_per_response = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1)]
    )

    class Meta:
        verbose_name = "rating settings"
        verbose_name_plural = "rating settings"

    def __str__(self) -> str:
        return "rating settings"
