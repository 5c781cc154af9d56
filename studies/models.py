"""The spine both study kinds share.

A Study has Conditions (between subjects: a participant belongs to exactly one). What a participant is shown
differs by kind:

* rating study: Prompts (a dialogue opening) and, per condition, Responses to rate on the study's scale;
* questionnaire study: an Instrument (e.g. PANAS) answered before and after imagining a Situation
  (studies/questionnaire_models.py).

What a kind does is declared once, in studies/kinds/. Participants get Assignments (what they are shown, in
order). Each rating-study Assignment has at most one Rating (kinds/rating/models.py); each pairwise page is a
PairItem (kinds/pairwise/models.py); each questionnaire answer is a QuestionnaireAnswer of a QuestionnaireRun. The database keeps these invariants with unique and check
constraints, so no code path can store an answer twice.
"""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q

from studies.exclusion_rules import default_exclusion_rules
from studies.fields import PlainTextField
from studies.planned_analysis import default_planned_analysis, default_scale
from studies.rating_settings import study_settings_normalise

from .authenticity_models import PICTURE_HELP, REPEAT_HELP, TRAP_HELP
from .kinds.registry import kind_choices, step_choices
from .platforms.registry import platform_choices


class Valence(models.TextChoices):
    POSITIVE = "positive", "Positive"
    NEGATIVE = "negative", "Negative"
    NEUTRAL = "neutral", "Neutral / other"


class Emotion(models.Model):
    """An emotion label and the valence group analyses put it in. Data, editable in the admin:
    papers disagree on where e.g. nostalgic and sentimental belong."""

    name = models.CharField(max_length=64, unique=True)
    valence = models.CharField(max_length=16, choices=Valence.choices, default=Valence.NEUTRAL)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Study(models.Model):
    class Kind(models.TextChoices):
        """The built-in kinds' names (kinds/rating/kind.py, questionnaire.py, pairwise.py)."""

        RATING = "rating", "Rating study (rate responses on a scale)"
        QUESTIONNAIRE = "questionnaire", "Questionnaire study (instrument before and after a situation)"
        PAIRWISE = "pairwise", "Pairwise preference study (which of two replies is more empathetic)"

    class State(models.TextChoices):
        DRAFT = "draft", "Draft"
        LIVE = "live", "Live"
        PAUSED = "paused", "Paused"
        CLOSED = "closed", "Closed"

    class Platform(models.TextChoices):
        """The built-in recruiting platforms' names (studies/platforms/, recruiting/platform.py)."""

        PROLIFIC = "prolific", "Prolific"
        MTURK = "mturk", "Amazon Mechanical Turk"
        NONE = "none", "None (direct link)"

    slug = models.SlugField(max_length=64, unique=True)
    title = models.CharField(max_length=200)
    # Choices: every registered kind (studies/kinds/); `Kind` names the two built-in ones.
    kind = models.CharField(max_length=16, choices=kind_choices, default=Kind.RATING)
    state = models.CharField(max_length=8, choices=State.choices, default=State.DRAFT, db_index=True)
    description = models.TextField(blank=True, help_text="Internal notes; never shown to participants.")

    # What participants read.
    consent_text = models.TextField(blank=True)
    instructions_text = models.TextField(blank=True)
    worked_examples = models.JSONField(
        default=list,
        blank=True,
        help_text="Examples shown with the instructions: a list of objects with emotion, situation, "
        "speaker_utterance, response, rating (a scale value) and explanation.",
    )
    scale = models.JSONField(default=default_scale, help_text="List of {value, label}, shown in this order.")

    # Design.
    items_per_participant = models.PositiveSmallIntegerField(default=10, validators=[MinValueValidator(1)])
    quota_per_condition = models.PositiveIntegerField(default=200, validators=[MinValueValidator(1)])
    attention_check_max_failures = models.PositiveSmallIntegerField(
        default=0, help_text="A participant failing more attention checks than this is flagged for exclusion."
    )
    seed = models.BigIntegerField(default=0, help_text="Seeds every random draw of this study.")
    trap_hidden_instruction = models.BooleanField(default=False, help_text=TRAP_HELP)
    trap_repeat_items = models.PositiveSmallIntegerField(default=0, help_text=REPEAT_HELP)
    trap_picture = models.BooleanField(default=False, help_text=PICTURE_HELP)
    exclusion_rules = models.JSONField(
        default=default_exclusion_rules,
        blank=True,
        help_text="Declared before launch; the analysis applies these by default. attention_checks and "
        'incomplete: true/false; too_fast: null or {"min_median_ms": 1500}; straight_lining: null or '
        '{"min_items": 10, "corroborating_median_ms": 3000, "identical_alone": false} (identical answers '
        "count only with a wrong attention check or a fast median time, unless the scale has 5+ points); "
        "authenticity: true/false (participants the authenticity score flags). See docs/analysis.md.",
    )
    hypotheses = models.TextField(
        blank=True, help_text="What the study tests, written before launch; frozen with the design."
    )
    planned_analysis = models.JSONField(
        default=default_planned_analysis,
        blank=True,
        help_text="The tests, alpha and multiple-comparison correction planned before launch.",
    )

    # Recruiting platform and outcomes.
    # Choices: every registered recruiting platform (studies/platforms/).
    platform = models.CharField(max_length=16, choices=platform_choices, default=Platform.PROLIFIC)
    platform_study_id = models.CharField(
        max_length=128,
        blank=True,
        help_text="The recruiting platform's id of this study (Prolific's STUDY_ID, MTurk's HIT id). "
        "When set, entry links naming another study are refused.",
    )
    completion_code = models.CharField(max_length=64, blank=True)
    screened_out_code = models.CharField(
        max_length=64, blank=True, help_text="Given when consent is declined."
    )
    failed_checks_code = models.CharField(
        max_length=64,
        blank=True,
        help_text="Given when attention checks are failed (blank: the completion code).",
    )
    completion_redirect_url = models.CharField(
        max_length=500,
        blank=True,
        help_text="Where a finished participant is sent; {code} is replaced by their code. "
        "Prolific: https://app.prolific.com/submissions/complete?cc={code}",
    )
    time_limit_minutes = models.PositiveIntegerField(
        default=60, help_text="An active participant silent this long times out and gives back their items."
    )
    enrollments_per_address = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="At most this many new participants from one network address an hour. Blank: no limit, "
        "the right choice for most studies: the people of a lab, a campus or a mobile network share one "
        "address, and Prolific and MTurk already stop a worker from taking part twice.",
    )

    # Follow-up waves (studies/waves.py): a wave re-runs its parent's design on new conditions.
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="waves",
        help_text="The study this one is a follow-up wave of (its stored baseline is compared against).",
    )
    rerate_share = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="A wave's share of the parent's baseline participants who re-rate its baseline (rater drift).",
    )
    family_exclusive = models.BooleanField(
        default=True, help_text="A participant of another study of the same family cannot join this one."
    )

    created_at = models.DateTimeField(auto_now_add=True)
    launched_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "studies"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.title} ({self.slug})"

    @property
    def scale_values(self) -> list[int]:
        return [int(option["value"]) for option in self.scale]

    def clean(self) -> None:
        super().clean()
        study_settings_normalise(self)


class Condition(models.Model):
    """One between-subjects arm: the human baseline or one LLM."""

    class Kind(models.TextChoices):
        HUMAN = "human", "Human"
        LLM = "llm", "LLM"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="conditions")
    name = models.SlugField(max_length=64, help_text="Short id used in exports, e.g. human, gpt4.")
    label = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.HUMAN)
    is_baseline = models.BooleanField(
        default=False, help_text="Analyses compare other conditions with this one."
    )
    quota = models.PositiveIntegerField(
        null=True, blank=True, help_text="Participants for this condition; blank: the study's quota."
    )
    position = models.PositiveSmallIntegerField(default=0)
    enrolling = models.BooleanField(default=True, help_text="Off: takes no new participants.")

    class Meta:
        ordering = ["study", "position", "name"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="condition_unique_name_per_study"),
        ]

    def __str__(self) -> str:
        return f"{self.study.slug}/{self.name}"

    @property
    def effective_quota(self) -> int:
        return self.quota if self.quota is not None else self.study.quota_per_condition


class Prompt(models.Model):
    """A dialogue opening: the emotion, the situation the speaker described, and their first utterance."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="prompts")
    dialogue_id = models.CharField(max_length=100)
    emotion = models.ForeignKey(Emotion, on_delete=models.PROTECT, related_name="prompts")
    situation = PlainTextField()
    speaker_utterance = PlainTextField()

    class Meta:
        ordering = ["study", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "dialogue_id"], name="prompt_unique_dialogue_per_study"),
        ]

    def __str__(self) -> str:
        return f"{self.dialogue_id} ({self.emotion.name})"


# The responses a participant may be shown: the first sample, not flagged in review.
RESPONSE_ELIGIBLE = Q(sample_index=0) & ~Q(review="flagged")


class Response(models.Model):
    """The text a condition shows for a prompt. Exactly one per (prompt, condition, sample)."""

    class Source(models.TextChoices):
        CORPUS = "corpus", "Imported from a corpus"
        GENERATED = "generated", "Generated by an LLM"
        EDITED = "edited", "Edited by an admin"
        # A text an LLM judge rates that no participant is shown (a kind's own unit, e.g. a conversation's
        # transcript): kept out of the responses export, which lists what participants may be shown.
        JUDGE_INPUT = "judge_input", "Written for an LLM judge, never shown to participants"

    class Review(models.TextChoices):
        OK = "ok", "OK"
        FLAGGED = "flagged", "Flagged for review"
        APPROVED = "approved", "Approved after review"

    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="responses")
    condition = models.ForeignKey(Condition, on_delete=models.CASCADE, related_name="responses")
    sample_index = models.PositiveSmallIntegerField(default=0)
    text = PlainTextField()
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.CORPUS)
    review = models.CharField(max_length=16, choices=Review.choices, default=Review.OK, db_index=True)
    review_flags = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["condition", "prompt"]
        constraints = [
            models.UniqueConstraint(
                fields=["prompt", "condition", "sample_index"],
                name="response_unique_per_prompt_condition_sample",
            ),
            models.CheckConstraint(condition=~Q(text=""), name="response_text_not_empty"),
        ]
        indexes = [
            models.Index(
                fields=["condition", "id"],
                condition=RESPONSE_ELIGIBLE,
                name="response_eligible_by_cond",
            )
        ]

    def __str__(self) -> str:
        return f"{self.condition.name} → {self.prompt.dialogue_id}"


class AttentionCheck(models.Model):
    """An instructed-response item mixed into the rating pages ("please choose Okay for this one")."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="attention_checks")
    emotion_label = models.CharField(max_length=64, default="attention check")
    situation = PlainTextField()
    speaker_utterance = PlainTextField()
    response_text = PlainTextField(help_text="Shown where a response would be; says which option to pick.")
    expected_value = models.SmallIntegerField()
    after_item = models.PositiveSmallIntegerField(help_text="Shown after this many regular items (0: first).")
    after_item_max = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Blank: after 'after item' "
        "items for all. Else each participant's own place, drawn from 'after item' to this.")  # fmt: skip

    class Meta:
        ordering = ["study", "after_item", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(after_item_max__isnull=True) | Q(after_item_max__gte=F("after_item")),
                name="attention_check_range_ordered",
                violation_error_message="The last place comes before the first.",
            )
        ]

    def __str__(self) -> str:
        return f"check after item {self.after_item}{'–' + str(self.after_item_max) if self.after_item_max else ''}"


class PairAttentionCheck(models.Model):
    """A known-answer pair: a good reply against a clearly inadequate one, shown like any other pair (the side of
    the good reply is drawn per participant). Choosing anything but the good reply counts as a failed check."""

    study = models.ForeignKey("Study", on_delete=models.CASCADE, related_name="pair_attention_checks")
    emotion_label = models.CharField(max_length=64)
    situation = PlainTextField()
    speaker_utterance = PlainTextField()
    good_reply = PlainTextField()
    poor_reply = PlainTextField()
    after_item = models.PositiveSmallIntegerField(help_text="Shown after this many regular pairs (0: first).")

    class Meta:
        ordering = ["study", "after_item", "id"]

    def __str__(self) -> str:
        return f"known-answer pair after pair {self.after_item}"


class Participant(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        COMPLETED = "completed", "Completed"
        RETURNED = "returned", "Returned"
        TIMED_OUT = "timed_out", "Timed out"
        SCREENED_OUT = "screened_out", "Screened out"
        EXCLUDED = "excluded", "Excluded"

    class Step(models.TextChoices):
        CONSENT = "consent", "Consent"
        DEMOGRAPHICS = "demographics", "Demographics"
        INSTRUCTIONS = "instructions", "Instructions"
        TEQ = "teq", "Toronto Empathy Questionnaire"
        ITEMS = "items", "Items"
        Q_DEFAULT = "q_default", "Questionnaire (as you feel now)"
        Q_SITUATION = "q_situation", "Situation to imagine"
        Q_EVOKED = "q_evoked", "Questionnaire (after the situation)"
        DONE = "done", "Done"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="participants")
    condition = models.ForeignKey(
        Condition, null=True, blank=True, on_delete=models.PROTECT, related_name="participants"
    )
    external_id = models.CharField(max_length=128, help_text="PROLIFIC_PID or MTurk workerId.")
    platform = models.CharField(max_length=16, choices=platform_choices, default=Study.Platform.NONE)
    platform_study_id = models.CharField(
        max_length=128, blank=True, help_text="The platform's id of the study (STUDY_ID, hitId)."
    )
    platform_session_id = models.CharField(
        max_length=128, blank=True, help_text="The platform's id of this attempt (SESSION_ID, assignmentId)."
    )
    platform_data = models.JSONField(
        default=dict,
        blank=True,
        help_text="What else the platform needs back at the end (studies/platforms/).",
    )
    is_preview = models.BooleanField(default=False, help_text="Staff preview: never counted.")

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE, db_index=True)
    # Choices: every step of every registered kind (studies/kinds/); `Step` names the built-in kinds' steps.
    step = models.CharField(max_length=16, choices=step_choices, default=Step.CONSENT)
    seed = models.BigIntegerField(default=0, help_text="Seeds this participant's item order.")
    flagged_for_exclusion = models.BooleanField(default=False)
    exclusion_reasons = models.JSONField(default=list, blank=True)
    attention_failures = models.PositiveSmallIntegerField(default=0)
    teq_answers = models.JSONField(null=True, blank=True)
    teq_score = models.PositiveSmallIntegerField(null=True, blank=True)
    demographics = models.JSONField(null=True, blank=True)
    completion_code = models.CharField(max_length=64, blank=True)

    started_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study", "started_at"]
        constraints = [
            models.UniqueConstraint(fields=["study", "external_id"], name="participant_unique_external_id"),
        ]
        indexes = [
            models.Index(fields=["study", "condition", "status"], name="participant_study_cond_status"),
            models.Index(fields=["condition"], condition=Q(status="active"), name="participant_active_cond"),
        ]

    def __str__(self) -> str:
        return f"{self.external_id} ({self.study.slug})"


def _target_only(kinds: list[str], target: str | None) -> Q:
    """Pages of `kinds` name `target` and no other target (none at all for None)."""
    return Q(
        kind__in=kinds, **{f"{t}__isnull": t != target for t in ("response", "attention_check", "situation")}
    )


class Assignment(models.Model):
    """One page a participant is shown, in order: a response to rate, an attention check, or a situation."""

    class Kind(models.TextChoices):
        RESPONSE = "response", "Response to rate"
        ATTENTION = "attention", "Attention check"
        SITUATION = "situation", "Situation to imagine"
        REPEAT = "repeat", "Response shown again (consistency pair)"
        PICTURE = "picture", "Picture check (cognitive trap)"

    participant = models.ForeignKey(Participant, on_delete=models.CASCADE, related_name="assignments")
    position = models.PositiveSmallIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.RESPONSE)
    response = models.ForeignKey(
        Response, null=True, blank=True, on_delete=models.PROTECT, related_name="assignments"
    )
    attention_check = models.ForeignKey(
        AttentionCheck, null=True, blank=True, on_delete=models.PROTECT, related_name="assignments"
    )
    situation = models.ForeignKey(
        "Situation", null=True, blank=True, on_delete=models.PROTECT, related_name="assignments"
    )
    shown_at = models.DateTimeField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["participant", "position"]
        constraints = [
            models.UniqueConstraint(fields=["participant", "position"], name="assignment_unique_position"),
            models.UniqueConstraint(  # a consistency pair's second showing is the one repeat
                fields=["participant", "response", "kind"],
                condition=Q(response__isnull=False),
                name="assignment_unique_response_per_participant",
            ),
            models.CheckConstraint(  # each page names its one target; a picture check names none
                condition=_target_only(["response", "repeat"], "response")
                | _target_only(["attention"], "attention_check")
                | _target_only(["situation"], "situation")
                | _target_only(["picture"], None),
                name="assignment_kind_matches_target",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.participant.external_id} #{self.position}"


# The questionnaire kind's, the authenticity signals' and the frozen design's models, imported so Django
# registers them. The rating and pairwise kinds' answers and settings are in their packages (kinds/*/models.py).
from .authenticity_models import ParticipantAuthenticity  # noqa: E402
from .balance_models import BalanceCount, StatusDelta, StatusTally  # noqa: E402
from .design_models import StudyAmendment, StudyDesign  # noqa: E402
from .flags_models import DeclaredFlags, FlagsStale  # noqa: E402
from .questionnaire_models import (  # noqa: E402
    Instrument,
    InstrumentCategory,
    InstrumentItem,
    QuestionnaireAnswer,
    QuestionnaireRun,
    QuestionnaireSettings,
    Situation,
    StudySituation,
)

__all__ = [
    "AttentionCheck", "Assignment", "BalanceCount", "Condition", "DeclaredFlags", "Emotion", "FlagsStale", "Instrument", "InstrumentCategory", "InstrumentItem",
    "PairAttentionCheck", "Participant", "ParticipantAuthenticity", "Prompt",
    "QuestionnaireAnswer", "QuestionnaireRun", "QuestionnaireSettings", "Response", "Situation", "StatusDelta", "StatusTally", "Study",
    "StudyAmendment", "StudyDesign", "StudySituation", "Valence",
]  # fmt: skip
