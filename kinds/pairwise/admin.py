"""The pairwise kind's admin pieces: its settings and its known-answer pairs on the study page (named by
`StudyKind.admin_inlines` in kinds/pairwise/kind.py)."""

from __future__ import annotations

from django.contrib import admin

from kinds.pairwise.models import PairwiseSettings
from studies.admin_design import FrozenInlineFormSet, KindSettingsInline
from studies.admin_extras import FriendlyProtectedDeleteInline
from studies.models import PairAttentionCheck


class PairwiseSettingsInline(KindSettingsInline):
    model = PairwiseSettings
    verbose_name = "pairwise settings"
    verbose_name_plural = "pairwise settings"
    fields = ["question", "focal_design", "adaptive_after", "adaptive_max_share"]


class PairAttentionCheckInline(FriendlyProtectedDeleteInline, admin.StackedInline):
    """Known-answer pairs: a good reply against a clearly inadequate one, disguised as any other pair."""

    model = PairAttentionCheck
    formset = FrozenInlineFormSet
    extra = 0
    verbose_name = "known-answer pair (attention check)"
    verbose_name_plural = "known-answer pairs (attention checks)"
    fields = ["emotion_label", "situation", "speaker_utterance", "good_reply", "poor_reply", "after_item"]
