# The rating kind's Rating, taken over from the studies app with its table (studies_rating), its rows, its one-to-one
# key and constraints unchanged: only Django's state moves (studies/migrations/0018).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("studies", "0018_rating_and_pairwise_models_to_their_kinds"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Rating",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("value", models.SmallIntegerField()),
                        ("response_time_ms", models.PositiveIntegerField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "assignment",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="rating",
                                to="studies.assignment",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "studies_rating",
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
