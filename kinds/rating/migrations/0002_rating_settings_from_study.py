# RatingSettings: the rating kind's settings, one row per rating study, with the values each study had on
# Study (scale_question, ask_teq, target_ratings_per_response). studies/0019 removes those columns after this.

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models

FIELDS = ("scale_question", "ask_teq", "target_ratings_per_response")


def settings_copy(apps, schema_editor):
    """Every rating study's values, as they stand on Study, into its RatingSettings row."""
    Study = apps.get_model("studies", "Study")
    RatingSettings = apps.get_model("rating", "RatingSettings")
    RatingSettings.objects.bulk_create(
        [
            RatingSettings(study_id=row["id"], **{f: row[f] for f in FIELDS})
            for row in Study.objects.filter(kind="rating").values("id", *FIELDS)
        ],
        batch_size=1000,
    )


def settings_copy_back(apps, schema_editor):
    """Back to the columns of Study (restored with their defaults by reversing studies/0019 first)."""
    Study = apps.get_model("studies", "Study")
    RatingSettings = apps.get_model("rating", "RatingSettings")
    for row in RatingSettings.objects.values("study_id", *FIELDS):
        Study.objects.filter(pk=row.pop("study_id")).update(**row)


class Migration(migrations.Migration):
    dependencies = [
        ("rating", "0001_rating_from_studies"),
        ("studies", "0018_rating_and_pairwise_models_to_their_kinds"),
    ]

    operations = [
        migrations.CreateModel(
            name="RatingSettings",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "scale_question",
                    models.CharField(
                        default="How empathetic is Speaker 2's response, compared with how you would have responded?",
                        max_length=300,
                    ),
                ),
                (
                    "ask_teq",
                    models.BooleanField(
                        default=False, verbose_name="Ask the Toronto Empathy Questionnaire before rating"
                    ),
                ),
                (
                    "target_ratings_per_response",
                    models.PositiveSmallIntegerField(
                        default=1, validators=[django.core.validators.MinValueValidator(1)]
                    ),
                ),
                (
                    "study",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="rating_settings",
                        to="studies.study",
                    ),
                ),
            ],
            options={
                "verbose_name": "rating settings",
                "verbose_name_plural": "rating settings",
            },
        ),
        migrations.RunPython(settings_copy, settings_copy_back),
    ]
