"""The questionnaire kind's admin pieces: its settings and situations on the study page (named by
`StudyKind.admin_inlines` in kinds/questionnaire/kind.py), and its instruments and situation pool."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count
from django.utils.text import Truncator

from studies.admin_design import KindSettingsInline
from studies.admin_extras import FriendlyProtectedDeleteInline
from studies.models import (
    Instrument,
    InstrumentCategory,
    InstrumentItem,
    QuestionnaireSettings,
    Situation,
    StudySituation,
)


class QuestionnaireSettingsInline(KindSettingsInline):
    model = QuestionnaireSettings
    verbose_name = "questionnaire settings"
    verbose_name_plural = "questionnaire settings"
    fields = [
        "instrument",
        "ask_demographics",
        "randomise_item_order",
        "llm_default_runs",
        "llm_evoked_runs",
        "significance_level",
    ]


class StudySituationInline(FriendlyProtectedDeleteInline, admin.TabularInline):
    """The situations a questionnaire study uses."""

    model = StudySituation
    extra = 0
    autocomplete_fields = ["situation"]
    verbose_name = "situation"
    verbose_name_plural = "situations"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("situation")


# --- Instruments and situations (written by their imports; browsable here) -----------------------------------


class InstrumentItemInline(admin.TabularInline):
    model = InstrumentItem
    extra = 0
    fields = ["number", "text", "reverse_scored"]


class InstrumentCategoryInline(admin.TabularInline):
    model = InstrumentCategory
    extra = 0
    fields = ["name", "item_numbers"]


@admin.register(Instrument)
class InstrumentAdmin(admin.ModelAdmin):
    list_display = ["name", "title", "scale_min", "scale_max", "compute_mode", "n_items"]
    search_fields = ["name", "title"]
    inlines = [InstrumentItemInline, InstrumentCategoryInline]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(items_count=Count("items"))

    @admin.display(description="items", ordering="items_count")
    def n_items(self, instrument: Instrument) -> int:
        return instrument.items_count


@admin.register(Situation)
class SituationAdmin(admin.ModelAdmin):
    """Written by the situations import: viewable, never added by hand."""

    list_display = ["code", "emotion", "factor_name", "text_short"]
    list_filter = ["emotion"]
    search_fields = ["text", "factor_name", "emotion"]

    def has_add_permission(self, request, obj=None):
        return False

    @admin.display(description="situation", ordering="emotion")
    def code(self, situation: Situation) -> str:
        return situation.code

    @admin.display(description="text")
    def text_short(self, situation: Situation) -> str:
        return Truncator(situation.text).chars(100)


def generation_view(model_admin, request, study):
    """The questionnaire kind's generation page (`StudyKind.generation_admin_view`): its LLM conditions answer the
    study's instrument instead of writing responses (generation's admin serves it)."""
    return model_admin._questionnaire_view(request, study)
