"""The toy kind's answers (tests/toy_kind/models.py)."""

import django.db.models.deletion
from django.db import migrations, models

WAVE_FIELDS = [
    ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
    ("hand", models.CharField(choices=[("left", "Left"), ("right", "Right")], max_length=5)),
    ("waved_at", models.DateTimeField()),
    (
        "participant",
        models.OneToOneField(
            on_delete=django.db.models.deletion.CASCADE, related_name="toy_wave", to="studies.participant"
        ),
    ),
]


class Migration(migrations.Migration):
    initial = True
    dependencies = [("studies", "0015_hidden_instruction_on_every_form")]
    operations = [migrations.CreateModel(name="ToyWave", fields=WAVE_FIELDS)]
