"""The pairwise kind's models (kinds/pairwise/kind.py): its settings and the pairs participants are shown and
answer. The known-answer pairs (`PairAttentionCheck`) stay in studies/models.py: the frozen design and the
waves' copy of a design (studies/design.py, waves.py) read them.

A `PairItem` is one page of a participant: one prompt with two replies of two conditions (which one is on the
left is stored), or one known-answer pair (`PairAttentionCheck`) disguised as any other. Its answer is written
on the same row, once: a conditional UPDATE of an unanswered row (kinds/pairwise/pages.py), and the check
constraints keep an answer whole (a choice exactly when answered).
"""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q

from studies.models import PairAttentionCheck, Participant, Prompt, Response, Study


class PairwiseSettings(models.Model):
    """A pairwise study's own settings (one per study of that kind). The number of pairs a participant answers
    is the study's `items_per_participant`."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="pairwise_settings")
    question = models.CharField(max_length=300, default="Which reply is more empathetic?")
    focal_design = models.BooleanField(
        default=False,
        help_text="Between subjects: each participant joins one condition (balanced like a rating study) and "
        "every pair they see involves it. Off: everyone is counted under the baseline condition and sees "
        "pairs of every two conditions.",
    )
    adaptive_after = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Adaptive phase: after this many answered pairs, condition pairs whose strengths' intervals "
        "overlap most are dealt more often (blank: the balanced design throughout).",
    )
    adaptive_max_share = models.FloatField(
        default=0.5,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="In the adaptive phase, no condition pair gets more than this share of the pairs dealt.",
    )

    class Meta:
        verbose_name = "pairwise settings"
        verbose_name_plural = "pairwise settings"
        db_table = "studies_pairwisesettings"

    def __str__(self) -> str:
        return "pairwise settings"


class PairItem(models.Model):
    """One page of a pairwise participant, in order, with its answer once given.

    Besides the pairs and the known-answer pairs, the authenticity traps (`trap`, never a vote): a consistency
    pair's second showing (`repeat`: the same prompt and replies with the sides swapped, after all the others) and
    the picture check (`picture`: no prompt, its answer one of the three choices or `skip`)."""

    class Choice(models.TextChoices):
        LEFT = "left", "A (left) is more empathetic"
        RIGHT = "right", "B (right) is more empathetic"
        TIE = "tie", "About the same"

    class Trap(models.TextChoices):
        NONE = "", "A pair or a known-answer pair"
        REPEAT = "repeat", "A consistency pair's second showing"
        PICTURE = "picture", "The picture check"

    # The picture check's "I can neither see the picture nor hear the sound" (the answer on a picture page only).
    PICTURE_SKIP = "skip"

    participant = models.ForeignKey(Participant, on_delete=models.CASCADE, related_name="pair_items")
    position = models.PositiveSmallIntegerField()
    prompt = models.ForeignKey(Prompt, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    left = models.ForeignKey(Response, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    right = models.ForeignKey(Response, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    known_answer = models.ForeignKey(
        PairAttentionCheck, null=True, blank=True, on_delete=models.PROTECT, related_name="items"
    )
    good_on_left = models.BooleanField(null=True, blank=True, help_text="Known-answer pairs: the good side.")
    shown_at = models.DateTimeField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    choice = models.CharField(max_length=8, choices=Choice.choices, blank=True)
    both_inadequate = models.BooleanField(default=False)
    response_time_ms = models.PositiveIntegerField(null=True, blank=True)
    trap = models.CharField(max_length=8, choices=Trap.choices, default="", blank=True)

    class Meta:
        db_table = "studies_pairitem"
        ordering = ["participant", "position"]
        constraints = [
            models.UniqueConstraint(fields=["participant", "position"], name="pair_item_unique_position"),
            # A participant sees each prompt at most once (a consistency pair's second showing apart).
            models.UniqueConstraint(
                fields=["participant", "prompt"],
                condition=Q(prompt__isnull=False, trap=""),
                name="pair_item_prompt_once_per_participant",
            ),
            models.CheckConstraint(
                condition=(
                    Q(
                        prompt__isnull=False,
                        left__isnull=False,
                        right__isnull=False,
                        known_answer__isnull=True,
                        good_on_left__isnull=True,
                        trap__in=["", "repeat"],
                    )
                    & ~Q(left=F("right"))
                )
                | Q(
                    prompt__isnull=True,
                    left__isnull=True,
                    right__isnull=True,
                    known_answer__isnull=False,
                    good_on_left__isnull=False,
                    trap="",
                )
                | Q(
                    prompt__isnull=True,
                    left__isnull=True,
                    right__isnull=True,
                    known_answer__isnull=True,
                    good_on_left__isnull=True,
                    trap="picture",
                ),
                name="pair_item_pair_check_or_picture",
            ),
            models.CheckConstraint(
                condition=Q(answered_at__isnull=True, choice="")
                | Q(answered_at__isnull=False, choice__in=["left", "right", "tie"])
                | Q(answered_at__isnull=False, choice="skip", trap="picture"),
                name="pair_item_answer_whole",
            ),
        ]
        indexes = [models.Index(fields=["prompt"], name="pair_item_prompt")]

    def __str__(self) -> str:
        return f"{self.participant_id} pair #{self.position}"

    @property
    def is_check(self) -> bool:
        return self.known_answer_id is not None
