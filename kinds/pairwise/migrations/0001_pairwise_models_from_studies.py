# The pairwise kind's PairwiseSettings and PairItem, taken over from the studies app with their tables
# (studies_pairwisesettings, studies_pairitem), rows, keys, constraints and indexes unchanged: only Django's state
# moves (studies/migrations/0018).

import django.core.validators
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
                    name="PairwiseSettings",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "question",
                            models.CharField(default="Which reply is more empathetic?", max_length=300),
                        ),
                        (
                            "focal_design",
                            models.BooleanField(
                                default=False,
                                help_text="Between subjects: each participant joins one condition (balanced like a rating study) and every pair they see involves it. Off: everyone is counted under the baseline condition and sees pairs of every two conditions.",
                            ),
                        ),
                        (
                            "adaptive_after",
                            models.PositiveIntegerField(
                                blank=True,
                                help_text="Adaptive phase: after this many answered pairs, condition pairs whose strengths' intervals overlap most are dealt more often (blank: the balanced design throughout).",
                                null=True,
                            ),
                        ),
                        (
                            "adaptive_max_share",
                            models.FloatField(
                                default=0.5,
                                help_text="In the adaptive phase, no condition pair gets more than this share of the pairs dealt.",
                                validators=[
                                    django.core.validators.MinValueValidator(0.0),
                                    django.core.validators.MaxValueValidator(1.0),
                                ],
                            ),
                        ),
                        (
                            "study",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="pairwise_settings",
                                to="studies.study",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "pairwise settings",
                        "verbose_name_plural": "pairwise settings",
                        "db_table": "studies_pairwisesettings",
                    },
                ),
                migrations.CreateModel(
                    name="PairItem",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("position", models.PositiveSmallIntegerField()),
                        (
                            "good_on_left",
                            models.BooleanField(
                                blank=True, help_text="Known-answer pairs: the good side.", null=True
                            ),
                        ),
                        ("shown_at", models.DateTimeField(blank=True, null=True)),
                        ("answered_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "choice",
                            models.CharField(
                                blank=True,
                                choices=[
                                    ("left", "A (left) is more empathetic"),
                                    ("right", "B (right) is more empathetic"),
                                    ("tie", "About the same"),
                                ],
                                max_length=8,
                            ),
                        ),
                        ("both_inadequate", models.BooleanField(default=False)),
                        ("response_time_ms", models.PositiveIntegerField(blank=True, null=True)),
                        (
                            "known_answer",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="items",
                                to="studies.pairattentioncheck",
                            ),
                        ),
                        (
                            "left",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="studies.response",
                            ),
                        ),
                        (
                            "participant",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="pair_items",
                                to="studies.participant",
                            ),
                        ),
                        (
                            "prompt",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="studies.prompt",
                            ),
                        ),
                        (
                            "right",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="studies.response",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "studies_pairitem",
                        "ordering": ["participant", "position"],
                        "indexes": [models.Index(fields=["prompt"], name="pair_item_prompt")],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("participant", "position"), name="pair_item_unique_position"
                            ),
                            models.UniqueConstraint(
                                condition=models.Q(("prompt__isnull", False)),
                                fields=("participant", "prompt"),
                                name="pair_item_prompt_once_per_participant",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    models.Q(
                                        ("good_on_left__isnull", True),
                                        ("known_answer__isnull", True),
                                        ("left__isnull", False),
                                        ("prompt__isnull", False),
                                        ("right__isnull", False),
                                        models.Q(("left", models.F("right")), _negated=True),
                                    ),
                                    models.Q(
                                        ("good_on_left__isnull", False),
                                        ("known_answer__isnull", False),
                                        ("left__isnull", True),
                                        ("prompt__isnull", True),
                                        ("right__isnull", True),
                                    ),
                                    _connector="OR",
                                ),
                                name="pair_item_pair_or_check",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    models.Q(("answered_at__isnull", True), ("choice", "")),
                                    models.Q(
                                        ("answered_at__isnull", False),
                                        ("choice__in", ["left", "right", "tie"]),
                                    ),
                                    _connector="OR",
                                ),
                                name="pair_item_answer_whole",
                            ),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
