"""An LLM judge: a model that rates a study's responses on the study's own scale.

* Judge: which provider and model rate, with which rubric prompt and decoding settings, how many samples per
  response, and whether it screens new conditions before any person sees them.
* JudgeRating: one judge's rating of one response, one row per (judge, response, sample); for a kind whose judges
  compare two replies (generation/judge_formats.py), one row per (judge, reply shown as A, reply shown as B
  (`versus`), sample), so each order of a pair is its own row. The unique constraints make a second stored
  rating impossible; the row's status is the record of the work, like GenerationItem's.

Judge ratings live here, apart from ratings.Rating: no human statistic reads this table. Analysis reads them
through generation.selectors.judge_ratings_frame only.
"""

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from generation.batch_records import BatchRecord
from generation.judge_formats import (
    DEFAULT_PAIR_RUBRIC,
    DEFAULT_RUBRIC,
    PAIR_PLACEHOLDERS,
    RUBRIC_PLACEHOLDERS,
    judge_format_of,
    scale_labels_problem,
)
from generation.placeholders import placeholders_validate
from studies.kinds import kind_of
from studies.models import Response, Study

# DEFAULT_RUBRIC and scale_labels_problem stay importable from here (their home is judge_formats).
__all__ = ["DEFAULT_RUBRIC", "Judge", "JudgeBatch", "JudgeRating", "rubric_validate", "scale_labels_problem"]
DEFAULT_RUBRICS = (DEFAULT_RUBRIC, DEFAULT_PAIR_RUBRIC)


def rubric_validate(rubric: str, *, placeholders: tuple[str, ...] = RUBRIC_PLACEHOLDERS) -> None:
    """ValidationError naming any placeholder a rubric uses that its format (`judge_formats`) does not fill."""
    placeholders_validate(rubric, allowed=placeholders, what="the rubric")


class Judge(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judges")
    name = models.SlugField(max_length=64, help_text="Unique within the study, e.g. gpt-4o-judge.")
    provider = models.ForeignKey("generation.Provider", on_delete=models.PROTECT, related_name="judges")
    model = models.CharField(max_length=200, help_text="As the endpoint names it.")
    rubric = models.TextField(
        default=DEFAULT_RUBRIC,
        help_text="The prompt sent for each response. Placeholders: "
        + ", ".join("{" + p + "}" for p in RUBRIC_PLACEHOLDERS)
        + ". The reply must name one of the scale's labels. A pairwise study's judge compares two replies: "
        + ", ".join("{" + p + "}" for p in PAIR_PLACEHOLDERS)
        + "; the reply must be A, B or SAME, optionally followed by BOTH INADEQUATE. Left as a default, the "
        "rubric becomes the default of the study's kind.",
    )
    system_prompt = models.TextField(blank=True)
    temperature = models.FloatField(default=0.0, validators=[MinValueValidator(0), MaxValueValidator(2)])
    max_tokens = models.PositiveIntegerField(default=8, validators=[MinValueValidator(1)])
    seed = models.BigIntegerField(null=True, blank=True, help_text="Sent where the endpoint supports it.")
    n_samples = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(20)], help_text="Ratings per response."
    )
    screens_new_conditions = models.BooleanField(
        default=False,
        help_text="Rate new LLM conditions' responses as soon as they are generated, before any person sees them.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "name"]
        constraints = [models.UniqueConstraint(fields=["study", "name"], name="judge_unique_name_per_study")]

    def __str__(self) -> str:
        return f"{self.name} ({self.model})"

    def clean(self):
        super().clean()
        errors = {}
        if self.study_id and not kind_of(self.study).judged:
            errors["study"] = [f"Judges do not rate {self.study.kind} studies."]
            raise ValidationError(errors)
        placeholders = RUBRIC_PLACEHOLDERS
        if self.study_id:
            form = judge_format_of(self.study)
            placeholders = form.placeholders
            if not self.rubric or self.rubric in DEFAULT_RUBRICS:  # a default: the one of the study's kind
                self.rubric = form.default_rubric
            if problems := form.problems(self.study):
                errors["study"] = [problem[0].upper() + problem[1:] + "." for problem in problems]
        try:
            rubric_validate(self.rubric or "", placeholders=placeholders)
        except ValidationError as exc:
            errors["rubric"] = exc.messages
        if errors:
            raise ValidationError(errors)


class JudgeBatch(BatchRecord):
    """One submission of a judge's pending ratings to the provider's Batch API (a day's turnaround, cheaper).

    While a batch is open its ratings are held by it (running, the batch's claim token, claimed until the batch
    window ends), so no worker rates them one by one meanwhile; collecting stores, fails or gives back each."""

    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="batches")
    ratings_total = models.PositiveIntegerField(default=0)
    ratings_stored = models.PositiveIntegerField(default=0)
    ratings_failed = models.PositiveIntegerField(default=0)
    ratings_returned = models.PositiveIntegerField(
        default=0, help_text="Given back to ordinary rating (transient errors, unreadable or missing lines)."
    )

    class Meta(BatchRecord.Meta):
        pass

    def __str__(self) -> str:
        return f"{self.judge.name} batch {self.provider_batch_id or self.pk} ({self.status})"

    @property
    def claim_token(self) -> str:
        return f"judgebatch-{self.pk}"


class JudgeRating(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="ratings")
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="judge_ratings")
    sample_index = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    # The reply shown as B beside `response` (shown as A), for a judge that compares two replies; null otherwise.
    versus = models.ForeignKey(
        Response, null=True, blank=True, on_delete=models.CASCADE, related_name="judge_ratings_versus"
    )
    value = models.SmallIntegerField(
        null=True,
        blank=True,
        help_text="A value of the study's scale; for a comparison, 1 = A (response), 2 = B (versus), 3 = about the same.",
    )
    both_inadequate = models.BooleanField(
        null=True, blank=True, help_text="A comparison's verdict that both replies are inadequate."
    )
    reply_text = models.TextField(blank=True, help_text="The judge's reply as received.")
    # Work bookkeeping, as GenerationItem's.
    attempts = models.PositiveIntegerField(default=0)
    claim_token = models.CharField(max_length=36, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    error_kind = models.CharField(max_length=32, blank=True)
    provider_batch_id = models.CharField(max_length=200, blank=True)
    batch = models.ForeignKey(
        JudgeBatch, null=True, blank=True, on_delete=models.SET_NULL, related_name="ratings"
    )
    # Provenance of the stored value.
    request = models.JSONField(null=True, blank=True, help_text="The exact request body sent (no key).")
    raw_response = models.JSONField(null=True, blank=True)
    model_returned = models.CharField(max_length=200, blank=True)
    provider_response_id = models.CharField(max_length=200, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost = models.DecimalField(
        max_digits=14,
        decimal_places=8,
        default=0,
        help_text="USD spent on this rating: every call, including unparseable replies and discarded duplicates.",
    )
    spent_input_tokens = models.PositiveIntegerField(
        default=0, help_text="Input tokens of every call for this rating, as the replies reported them."
    )
    spent_output_tokens = models.PositiveIntegerField(
        default=0, help_text="Output tokens of every call for this rating, failed or not."
    )
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    rated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["judge", "response", "sample_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["judge", "response", "sample_index"],
                condition=models.Q(versus__isnull=True),
                name="judge_rating_unique_per_response_sample",
            ),
            models.UniqueConstraint(
                fields=["judge", "response", "versus", "sample_index"],
                condition=models.Q(versus__isnull=False),
                name="judge_rating_unique_per_order_sample",
            ),
            models.CheckConstraint(
                condition=~models.Q(status="done") | models.Q(value__isnull=False),
                name="judge_rating_done_has_value",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.judge.name} on response {self.response_id}#{self.sample_index}: {self.value}"
