"""The transcripts the chat judge wrote before `Response.Source.JUDGE_INPUT` existed (stored as `corpus`) become
judge inputs, so the study's responses export leaves them out as it does the new ones."""

from django.db import migrations

DIALOGUE_PREFIX = "chat:"  # kinds/chat/judge_format.py


def forwards(apps, schema_editor):
    Response = apps.get_model("studies", "Response")
    Response.objects.filter(
        prompt__study__kind="chat", prompt__dialogue_id__startswith=DIALOGUE_PREFIX, source="corpus"
    ).update(source="judge_input")


def backwards(apps, schema_editor):
    Response = apps.get_model("studies", "Response")
    Response.objects.filter(
        prompt__study__kind="chat", prompt__dialogue_id__startswith=DIALOGUE_PREFIX, source="judge_input"
    ).update(source="corpus")


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0003_crisis_resources_moderation_and_early_close"),
        ("studies", "0024_response_source_judge_input"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
