# The rating kind's fields leave Study: their values were copied into RatingSettings first
# (kinds/rating/migrations/0002_rating_settings_from_study.py), which this migration waits for.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("studies", "0018_rating_and_pairwise_models_to_their_kinds"),
        ("rating", "0002_rating_settings_from_study"),
    ]

    operations = [
        migrations.RemoveField(
            model_name="study",
            name="ask_teq",
        ),
        migrations.RemoveField(
            model_name="study",
            name="scale_question",
        ),
        migrations.RemoveField(
            model_name="study",
            name="target_ratings_per_response",
        ),
    ]
