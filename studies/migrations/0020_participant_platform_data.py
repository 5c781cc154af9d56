"""Participants keep a platform id and platform data, not MTurk's own columns: MTurk's hitId moves to
platform_study_id and its assignmentId to platform_session_id (what Prolific's STUDY_ID and SESSION_ID already
use), and `platform_data` holds what else a platform needs back. The platform's choices are the registered
platforms (studies/platforms/)."""

import studies.platforms.registry
from django.db import migrations, models
from django.db.models import F


def mturk_ids_forward(apps, schema_editor):
    Participant = apps.get_model("studies", "Participant")
    Participant.objects.filter(platform="mturk").update(
        platform_study_id=F("mturk_hit_id"), platform_session_id=F("mturk_assignment_id")
    )


def mturk_ids_backward(apps, schema_editor):
    Participant = apps.get_model("studies", "Participant")
    Participant.objects.filter(platform="mturk").update(
        mturk_hit_id=F("platform_study_id"), mturk_assignment_id=F("platform_session_id")
    )


class Migration(migrations.Migration):
    dependencies = [
        ("studies", "0019_rating_fields_leave_study"),
    ]

    operations = [
        migrations.AddField(
            model_name="participant",
            name="platform_data",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="What else the platform needs back at the end (studies/platforms/).",
            ),
        ),
        migrations.RunPython(mturk_ids_forward, mturk_ids_backward),
        migrations.RemoveField(model_name="participant", name="mturk_assignment_id"),
        migrations.RemoveField(model_name="participant", name="mturk_hit_id"),
        migrations.AlterField(
            model_name="participant",
            name="platform",
            field=models.CharField(
                choices=studies.platforms.registry.platform_choices, default="none", max_length=16
            ),
        ),
        migrations.AlterField(
            model_name="participant",
            name="platform_session_id",
            field=models.CharField(
                blank=True,
                help_text="The platform's id of this attempt (SESSION_ID, assignmentId).",
                max_length=128,
            ),
        ),
        migrations.AlterField(
            model_name="participant",
            name="platform_study_id",
            field=models.CharField(
                blank=True, help_text="The platform's id of the study (STUDY_ID, hitId).", max_length=128
            ),
        ),
        migrations.AlterField(
            model_name="study",
            name="platform",
            field=models.CharField(
                choices=studies.platforms.registry.platform_choices, default="prolific", max_length=16
            ),
        ),
    ]
