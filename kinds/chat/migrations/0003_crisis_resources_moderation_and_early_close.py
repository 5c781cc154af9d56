import django.db.models.deletion
from django.db import migrations, models

import kinds.chat.models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0002_responder_claims_and_the_responders_group"),
        ("generation", "0011_study_spending_budget"),
    ]

    operations = [
        migrations.AddField(
            model_name="chatsettings",
            name="support_resources",
            field=models.TextField(
                default=kinds.chat.models.default_support_resources,
                help_text="Shown when a participant's message names a crisis: one resource a line (addresses become links).",
            ),
        ),
        migrations.AddField(
            model_name="chatsettings",
            name="moderation_provider",
            field=models.ForeignKey(
                blank=True,
                help_text="Its moderation endpoint checks every message and reply beside the crisis-term list; blank: the list alone.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="generation.provider",
            ),
        ),
        migrations.AddField(
            model_name="conversation",
            name="crisis_count",
            field=models.PositiveSmallIntegerField(
                default=0, help_text="Participant messages that showed the support resources."
            ),
        ),
        migrations.AddField(
            model_name="conversation",
            name="crisis_open",
            field=models.BooleanField(
                default=False,
                help_text="The support resources are shown and the participant has not yet chosen to go on or end.",
            ),
        ),
        migrations.AddField(
            model_name="conversation",
            name="closed_by",
            field=models.CharField(
                blank=True,
                choices=[
                    ("budget", "The study's budget was spent"),
                    ("token_cap", "The participant's token cap was reached"),
                ],
                help_text="Why the platform closed the conversation early (blank: it did not).",
                max_length=12,
            ),
        ),
        migrations.AlterField(
            model_name="conversation",
            name="crisis_shown_at",
            field=models.DateTimeField(
                blank=True, help_text="When the support resources were first shown.", null=True
            ),
        ),
    ]
