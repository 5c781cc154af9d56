from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('studies', '0020_participant_platform_data'),
    ]

    operations = [
        # Participants from before it was recorded count as loaded (unknown is never a reason).
        migrations.AddField(
            model_name='participantauthenticity',
            name='loaded',
            field=models.BooleanField(default=True),
        ),
        migrations.AlterField(
            model_name='participantauthenticity',
            name='loaded',
            field=models.BooleanField(default=False),
        ),
        migrations.AlterField(
            model_name='study',
            name='trap_picture',
            field=models.BooleanField(default=False, help_text="Picture check (rating and pairwise studies): one extra page per participant, among their items, shows a picture that asks for one of the page's answers; a person sees what to choose, software reading the page's text cannot. 'I can't see the picture' leads to the same check as a sound (count the beeps), which a screen reader's user hears. A wrong answer lowers the authenticity score. Never counted as an answer (docs/participants.md)."),
        ),
        migrations.AlterField(
            model_name='study',
            name='trap_repeat_items',
            field=models.PositiveSmallIntegerField(default=0, help_text="Consistency pairs (rating and pairwise studies): this many of each participant's items are shown a second time after all the others, unannounced (a pair with its replies' sides swapped); answers far apart (two or more points; the other reply preferred) lower the authenticity score. The second showing is never counted."),
        ),
    ]
