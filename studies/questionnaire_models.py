"""The questionnaire kind's models (kinds/questionnaire/kind.py): its settings, instruments, situations, and
the runs that answer an instrument (a participant's or a model's)."""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from studies.fields import PlainTextField


class QuestionnaireSettings(models.Model):
    """A questionnaire study's own settings (one per study of that kind)."""

    study = models.OneToOneField("Study", on_delete=models.CASCADE, related_name="questionnaire_settings")
    instrument = models.ForeignKey(
        "Instrument", null=True, blank=True, on_delete=models.PROTECT, related_name="study_settings"
    )
    ask_demographics = models.BooleanField(default=False)
    randomise_item_order = models.BooleanField(default=True)
    llm_default_runs = models.PositiveIntegerField(
        default=50,
        verbose_name="LLM default runs",
        help_text="Runs of each LLM condition without a situation.",
    )
    llm_evoked_runs = models.PositiveIntegerField(
        default=10, verbose_name="LLM evoked runs", help_text="Runs of each LLM condition per situation."
    )
    significance_level = models.FloatField(
        default=0.01,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="α of the analysis' change tests.",
    )

    class Meta:
        verbose_name = "questionnaire settings"
        verbose_name_plural = "questionnaire settings"

    def __str__(self) -> str:
        return "questionnaire settings"


class Instrument(models.Model):
    """A questionnaire such as PANAS: items answered on one numeric range, scored by category."""

    class ComputeMode(models.TextChoices):
        SUM = "SUM", "Sum"
        SUM_X2 = "SUM*2", "Sum × 2"

    name = models.CharField(max_length=64, unique=True)
    title = models.CharField(max_length=200, blank=True)
    instructions = models.TextField(blank=True, help_text="Shown to participants above the items.")
    llm_prompt = PlainTextField(blank=True, help_text="The question put to a model; SCENARIO is replaced.")
    llm_system_prompt = PlainTextField(blank=True)
    scale_min = models.SmallIntegerField(default=1)
    scale_max = models.SmallIntegerField(default=5)
    anchors = models.JSONField(
        default=list, blank=True, help_text="Labels of scale_min..scale_max, in order."
    )
    compute_mode = models.CharField(max_length=8, choices=ComputeMode.choices, default=ComputeMode.SUM)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(scale_min__lt=models.F("scale_max")), name="instrument_range_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class InstrumentItem(models.Model):
    instrument = models.ForeignKey(Instrument, on_delete=models.CASCADE, related_name="items")
    number = models.PositiveSmallIntegerField(help_text="The item's number in the published order (1-based).")
    text = models.CharField(max_length=500)
    reverse_scored = models.BooleanField(default=False)

    class Meta:
        ordering = ["instrument", "number"]
        constraints = [
            models.UniqueConstraint(fields=["instrument", "number"], name="instrument_item_unique_number"),
        ]

    def __str__(self) -> str:
        return f"{self.instrument.name} {self.number}: {self.text}"


class InstrumentCategory(models.Model):
    """A score reported by the instrument, e.g. PANAS Positive Affect: the sum of its items."""

    instrument = models.ForeignKey(Instrument, on_delete=models.CASCADE, related_name="categories")
    name = models.CharField(max_length=100)
    item_numbers = models.JSONField(default=list)

    class Meta:
        ordering = ["instrument", "id"]
        verbose_name_plural = "instrument categories"
        constraints = [
            models.UniqueConstraint(fields=["instrument", "name"], name="instrument_category_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.instrument.name}: {self.name}"


class Situation(models.Model):
    """A scenario to imagine, from the EmotionBench pool: emotion → factor → situation."""

    emotion = models.CharField(max_length=64)
    factor_index = models.PositiveSmallIntegerField(help_text="1-based, within the emotion.")
    factor_name = models.CharField(max_length=200)
    index = models.PositiveSmallIntegerField(help_text="1-based, within the factor.")
    text = PlainTextField()

    class Meta:
        ordering = ["emotion", "factor_index", "index"]
        constraints = [
            models.UniqueConstraint(
                fields=["emotion", "factor_index", "index"], name="situation_unique_position"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.emotion}-{self.factor_index} #{self.index}"

    @property
    def code(self) -> str:
        """The published files' column naming: Anger-1_scenario-3."""
        return f"{self.emotion}-{self.factor_index}_scenario-{self.index}"


class StudySituation(models.Model):
    """The situations a questionnaire study uses."""

    study = models.ForeignKey("Study", on_delete=models.CASCADE, related_name="study_situations")
    situation = models.ForeignKey(Situation, on_delete=models.PROTECT, related_name="study_situations")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "situation"], name="study_situation_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.study} · {self.situation}"


class QuestionnaireRun(models.Model):
    """One complete answering of the study's instrument, by a participant or by a model.

    phase=default: no situation (how the subject feels now); phase=evoked: after imagining `situation`.
    A human participant has one of each; a model has `run_index` 0..n-1 per (phase, situation).
    """

    class Phase(models.TextChoices):
        DEFAULT = "default", "Default (as you feel now)"
        EVOKED = "evoked", "Evoked (after imagining the situation)"

    class Source(models.TextChoices):
        PARTICIPANT = "participant", "Participant"
        LLM = "llm", "LLM"
        IMPORTED = "imported", "Imported published results"

    study = models.ForeignKey("Study", on_delete=models.CASCADE, related_name="questionnaire_runs")
    condition = models.ForeignKey("Condition", on_delete=models.CASCADE, related_name="questionnaire_runs")
    participant = models.ForeignKey(
        "Participant", null=True, blank=True, on_delete=models.CASCADE, related_name="questionnaire_runs"
    )
    subject_key = models.CharField(
        max_length=128, help_text="Who answered: a participant's id, or the model run's key."
    )
    phase = models.CharField(max_length=8, choices=Phase.choices)
    situation = models.ForeignKey(
        Situation, null=True, blank=True, on_delete=models.PROTECT, related_name="questionnaire_runs"
    )
    run_index = models.PositiveIntegerField(default=0)
    item_order = models.JSONField(default=list, help_text="Item numbers in the order they were shown.")
    traps = models.JSONField(
        default=dict,
        blank=True,
        help_text="The authenticity traps' answers on this page, never part of the instrument's scores: "
        '{"repeat": {item number: the second answer}, "picture": the answer, or "skip"}.',
    )
    source = models.CharField(max_length=16, choices=Source.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study", "condition", "phase", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "condition", "subject_key", "phase", "run_index"],
                name="questionnaire_run_unique",
            ),
            models.CheckConstraint(
                condition=Q(phase="default", situation__isnull=True)
                | Q(phase="evoked", situation__isnull=False),
                name="questionnaire_run_situation_matches_phase",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.subject_key} {self.phase} #{self.run_index}"


class QuestionnaireAnswer(models.Model):
    run = models.ForeignKey(QuestionnaireRun, on_delete=models.CASCADE, related_name="answers")
    item_number = models.PositiveSmallIntegerField()
    value = models.SmallIntegerField()
    position = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Where the item was shown.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "item_number"], name="questionnaire_answer_unique_item"),
        ]

    def __str__(self) -> str:
        return f"{self.run}: item {self.item_number} = {self.value}"
