"""Study kinds as units: the questionnaire kind's fields move off Study into QuestionnaireSettings (data kept),
and Study.kind / Participant.step take their choices from the registered kinds (every step of every kind)."""

import django.core.validators
import django.db.models.deletion
import studies.kinds.registry
from django.db import migrations, models

FIELDS = ["instrument_id", "ask_demographics", "randomise_item_order", "llm_default_runs", "llm_evoked_runs",
          "significance_level"]


def settings_copy(apps, schema_editor):
    """Each questionnaire study's own fields move to its QuestionnaireSettings, values unchanged (and any other
    study that had an instrument, so nothing set on a study is lost)."""
    Study = apps.get_model("studies", "Study")
    QuestionnaireSettings = apps.get_model("studies", "QuestionnaireSettings")
    studies = Study.objects.filter(models.Q(kind="questionnaire") | models.Q(instrument__isnull=False))
    QuestionnaireSettings.objects.bulk_create(
        [
            QuestionnaireSettings(study_id=study.pk, **{name: getattr(study, name) for name in FIELDS})
            for study in studies.order_by("pk")
        ]
    )


def settings_copy_back(apps, schema_editor):
    Study = apps.get_model("studies", "Study")
    QuestionnaireSettings = apps.get_model("studies", "QuestionnaireSettings")
    for settings in QuestionnaireSettings.objects.all():
        Study.objects.filter(pk=settings.study_id).update(**{name: getattr(settings, name) for name in FIELDS})


class Migration(migrations.Migration):

    dependencies = [
        ('studies', '0002_seed_emotions'),
    ]

    operations = [
        migrations.CreateModel(
            name='QuestionnaireSettings',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('ask_demographics', models.BooleanField(default=False)),
                ('randomise_item_order', models.BooleanField(default=True)),
                ('llm_default_runs', models.PositiveIntegerField(default=50, help_text='Runs of each LLM condition without a situation.', verbose_name='LLM default runs')),
                ('llm_evoked_runs', models.PositiveIntegerField(default=10, help_text='Runs of each LLM condition per situation.', verbose_name='LLM evoked runs')),
                ('significance_level', models.FloatField(default=0.01, help_text="α of the analysis' change tests.", validators=[django.core.validators.MinValueValidator(0.0), django.core.validators.MaxValueValidator(1.0)])),
                ('instrument', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='study_settings', to='studies.instrument')),
                ('study', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='questionnaire_settings', to='studies.study')),
            ],
            options={
                'verbose_name': 'questionnaire settings',
                'verbose_name_plural': 'questionnaire settings',
            },
        ),
        migrations.RunPython(settings_copy, settings_copy_back),
        migrations.RemoveField(
            model_name='study',
            name='ask_demographics',
        ),
        migrations.RemoveField(
            model_name='study',
            name='instrument',
        ),
        migrations.RemoveField(
            model_name='study',
            name='llm_default_runs',
        ),
        migrations.RemoveField(
            model_name='study',
            name='llm_evoked_runs',
        ),
        migrations.RemoveField(
            model_name='study',
            name='randomise_item_order',
        ),
        migrations.RemoveField(
            model_name='study',
            name='significance_level',
        ),
        migrations.AlterField(
            model_name='participant',
            name='step',
            field=models.CharField(choices=studies.kinds.registry.step_choices, default='consent', max_length=16),
        ),
        migrations.AlterField(
            model_name='study',
            name='kind',
            field=models.CharField(choices=studies.kinds.registry.kind_choices, default='rating', max_length=16),
        ),
    ]
