"""The rating kind's admin pieces: its settings on the study page (named by `StudyKind.admin_inlines` in
kinds/rating/kind.py)."""

from __future__ import annotations

from studies.admin_design import KindSettingsInline

from .models import RatingSettings


class RatingSettingsInline(KindSettingsInline):
    model = RatingSettings
    verbose_name = "rating settings"
    verbose_name_plural = "rating settings"
    fields = ["scale_question", "target_ratings_per_response", "ask_teq"]
