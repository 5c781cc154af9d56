"""Authenticity: whether a study's human raters behave like people (studies/authenticity.py computes it).

A study's trap settings are fields of Study (`trap_hidden_instruction`, `trap_repeat_items`, `trap_picture`); one row per participant holds what their
browser reported with their answers (compact JSON, one entry per page sent), the score computed from it with
its reasons, and a researcher's review of a flag. Nothing here rejects anyone or withholds a payment: the flag
is for review and for a declared exclusion rule (studies/exclusion_rules.py).
"""

from django.conf import settings
from django.db import models

TRAP_HELP = (
    "Authenticity trap: put an instruction in the text of the consent, item, pair and questionnaire pages that "
    "people never see or hear (hidden from the screen and from screen readers) but an agent reading the page's "
    "text does; it asks for a word in a field nobody else can reach. Following it lowers the authenticity score (docs/participants.md)."
)

REPEAT_HELP = (
    "Consistency pairs (rating and pairwise studies): this many of each participant's items are shown a second time "
    "after all the others, unannounced (a pair with its replies' sides swapped); answers far apart (two or more "
    "points; the other reply preferred) lower the authenticity score. The second showing is never counted."
)

PICTURE_HELP = (
    "Picture check (rating and pairwise studies): one extra page per participant, among their items, shows a "
    "picture that asks for one of the page's answers; a person sees what to choose, software reading the page's text cannot. "
    "'I can't see the picture' leads to the same check as a sound (count the beeps), which a screen reader's user "
    "hears. A wrong answer lowers the authenticity score. Never counted as an answer (docs/participants.md)."
)


# The traps a new study starts with (the admin's form for a new study, the demos): those that cost people
# nothing. The picture check stays the researcher's choice: it adds a page.
NEW_STUDY_TRAPS = {"trap_hidden_instruction": True, "trap_repeat_items": 2}


class ParticipantAuthenticity(models.Model):
    """What one participant's browser reported, and the authenticity score computed from it."""

    class Review(models.TextChoices):
        OPEN = "open", "Not reviewed"
        CONFIRMED = "confirmed", "Confirmed: not an authentic participant"
        CLEARED = "cleared", "Cleared: authentic"

    class Picture(models.TextChoices):
        PASSED = "passed", "Answered as the picture asked"
        FAILED = "failed", "Answered otherwise than the picture asked"
        SKIPPED = "skipped", "Could not see the picture (before the sound check; never counted)"
        NEITHER = "neither", "Could neither see the picture nor hear its sound"

    participant = models.OneToOneField(
        "Participant", on_delete=models.CASCADE, related_name="authenticity", primary_key=True
    )
    # Once per participant: user-agent class, automation hints, screen size (see authenticity.client_parse).
    client = models.JSONField(default=dict, blank=True)
    # One entry per page sent, keyed "<step>:<position>": the page's signals (see authenticity.page_parse).
    pages = models.JSONField(default=dict, blank=True)
    # 0-100 (100: nothing unusual); None: the browser sent no signals at all (e.g. JavaScript off).
    score = models.PositiveSmallIntegerField(null=True, blank=True)
    reasons = models.JSONField(default=list, blank=True)
    # Consistency pairs answered: {"<position of the second showing>": 1 when the answers lie far apart, else 0}.
    pairs = models.JSONField(default=dict, blank=True)
    # The picture check's outcome (studies/authenticity.py `picture_outcome`); blank: not answered or not asked.
    picture = models.CharField(max_length=8, choices=Picture.choices, blank=True)
    # What the participant's answers show, computed when they finish (authenticity_reasons.answers_summary):
    # agreement with the study's LLM judges, reading time against the texts' length, timing across pages.
    answers = models.JSONField(default=dict, blank=True)
    # The consent page's stylesheet was fetched (ratings.views.study_stylesheet): every browser fetches it, with
    # JavaScript off too; a program posting the forms over plain HTTP does not.
    loaded = models.BooleanField(default=False)
    flagged = models.BooleanField(default=False, db_index=True)
    # What the declared `authenticity` exclusion rule drops: flagged and not cleared, or confirmed in review
    # (authenticity.authenticity_excluded, kept here so every reader, SQL included, reads one column).
    excluded = models.BooleanField(default=False, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    review = models.CharField(max_length=16, choices=Review.choices, default=Review.OPEN)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "participant authenticity"
        verbose_name_plural = "participant authenticity"

    def __str__(self) -> str:
        return f"authenticity of participant {self.participant_id}"
