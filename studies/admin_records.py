"""The admin of the study's records: emotions (editable data), and the prompts, responses and participants that
imports, generation and participants write (read-mostly here)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db import transaction
from django.db.models import Count
from django.utils.text import Truncator

from .admin_forms import LinesField
from .balance_counts import counts_rebuild
from .models import (
    Assignment,
    Emotion,
    Participant,
    Prompt,
    Response,
    Study,
)
from .selectors import AUTHENTICITY_FLAGGED, COUNTED_RATINGS, participants_exclusion_flags

# --- Emotions -----------------------------------------------------------------------------------------------


@admin.register(Emotion)
class EmotionAdmin(admin.ModelAdmin):
    list_display = ["name", "valence", "prompt_count"]
    list_editable = ["valence"]
    list_filter = ["valence"]
    search_fields = ["name"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_prompts=Count("prompts"))

    @admin.display(description="prompts", ordering="n_prompts")
    def prompt_count(self, emotion: Emotion) -> int:
        return emotion.n_prompts


# --- Prompts and responses (read-mostly: they come from imports and generation) ------------------------------


class ReadMostlyAdmin(admin.ModelAdmin):
    """Rows that imports, generation and participants write: viewable, never added by hand."""

    def has_add_permission(self, request, obj=None):
        return False


class ResponseInline(admin.TabularInline):
    model = Response
    extra = 0
    fields = ["condition", "sample_index", "text", "source", "review"]
    readonly_fields = ["condition", "sample_index", "text", "source"]
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("condition__study", "prompt")


@admin.register(Prompt)
class PromptAdmin(ReadMostlyAdmin):
    list_display = ["dialogue_id", "study", "emotion", "valence", "situation_short"]
    list_filter = ["study", "emotion__valence", "emotion"]
    search_fields = ["dialogue_id", "situation", "speaker_utterance"]
    list_select_related = ["study", "emotion"]
    readonly_fields = ["study", "dialogue_id", "emotion"]
    fields = ["study", "dialogue_id", "emotion", "situation", "speaker_utterance"]
    inlines = [ResponseInline]

    @admin.display(description="valence", ordering="emotion__valence")
    def valence(self, prompt: Prompt) -> str:
        return prompt.emotion.get_valence_display()

    @admin.display(description="situation")
    def situation_short(self, prompt: Prompt) -> str:
        return Truncator(prompt.situation).chars(90)


@admin.register(Response)
class ResponseAdmin(ReadMostlyAdmin):
    list_display = ["dialogue_id", "study", "condition", "sample_index", "source", "review", "text_short"]
    list_filter = ["condition__study", "condition__name", "source", "review"]
    search_fields = ["text", "prompt__dialogue_id"]
    list_select_related = ["prompt", "condition__study"]
    readonly_fields = ["prompt", "condition", "sample_index", "source", "flags", "created_at", "updated_at"]
    fields = ["prompt", "condition", "sample_index", "text", "source", "review", "flags"]
    actions = ["approve_selected"]

    @admin.display(description="dialogue", ordering="prompt__dialogue_id")
    def dialogue_id(self, response: Response) -> str:
        return response.prompt.dialogue_id

    @admin.display(description="study", ordering="condition__study__slug")
    def study(self, response: Response) -> str:
        return response.condition.study.slug

    @admin.display(description="text")
    def text_short(self, response: Response) -> str:
        return Truncator(response.text).chars(100)

    @admin.display(description="review flags")
    def flags(self, response: Response) -> str:
        """What generation's review found (its record, not a setting)."""
        return ", ".join(str(flag) for flag in response.review_flags or []) or "-"

    @admin.action(description="Approve selected responses after review")
    def approve_selected(self, request, queryset):
        """Flagged responses, and replies with a review flag (e.g. the same as another condition's): approved,
        the researcher's decision (a pairwise study deals two near-identical replies only once one is)."""
        flagged = [
            pk
            for pk, review, flags in queryset.exclude(review=Response.Review.APPROVED).values_list(
                "pk", "review", "review_flags"
            )
            if review == Response.Review.FLAGGED or flags
        ]
        n = Response.objects.filter(pk__in=flagged).update(review=Response.Review.APPROVED)
        self.message_user(request, f"{n} flagged responses approved.", messages.SUCCESS)


# --- Participants (external ids: the admin is staff-only) ---------------------------------------------------


class AssignmentInline(admin.TabularInline):
    model = Assignment
    extra = 0
    can_delete = False
    fields = ["position", "kind", "response", "attention_check", "shown_at", "answered_at", "rating_value"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .select_related(
                "response__prompt", "response__condition", "attention_check", "rating", "participant"
            )
        )

    @admin.display(description="rating")
    def rating_value(self, assignment: Assignment):
        rating = getattr(assignment, "rating", None)
        return rating.value if rating is not None else "-"


@admin.register(Participant)
class ParticipantAdmin(ReadMostlyAdmin):
    list_display = [
        "external_id",
        "study",
        "condition",
        "status",
        "step",
        "flagged_for_exclusion",
        "declared_rules",
        "authenticity_flag",
        "is_preview",
        "n_ratings",
        "started_at",
        "last_seen_at",
    ]
    list_filter = ["study", "status", "flagged_for_exclusion", "is_preview", "platform", "condition__name"]
    search_fields = ["external_id", "platform_session_id"]
    list_select_related = ["study", "condition__study"]
    date_hierarchy = "started_at"
    inlines = [AssignmentInline]
    readonly_fields = [
        "study",
        "condition",
        "external_id",
        "platform",
        "platform_study_id",
        "platform_session_id",
        "platform_data",
        "is_preview",
        "status",
        "step",
        "seed",
        "attention_failures",
        "teq_answers",
        "teq_score",
        "demographics",
        "completion_code",
        "started_at",
        "last_seen_at",
        "finished_at",
    ]
    # Only the exclusion decision is edited here; everything else is the record of what happened.
    fields = ["flagged_for_exclusion", "exclusion_reasons", *readonly_fields]

    class Media:
        js = ["studies/record_tables.js"]  # the answers' table, scrolled by keyboard on a phone

    def delete_queryset(self, request, queryset):
        """Deleting participants takes them and their pages off the balance's running totals."""
        studies = list(Study.objects.filter(participants__in=queryset).distinct())
        with transaction.atomic():
            super().delete_queryset(request, queryset)
            for study in studies:
                counts_rebuild(study)

    def delete_model(self, request, obj):
        with transaction.atomic():
            super().delete_model(request, obj)
            counts_rebuild(obj.study)

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if db_field.name == "exclusion_reasons":  # a list of texts: one a line, not JSON
            return LinesField(label="Exclusion reasons")
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                ratings_count=Count("assignments__rating", filter=COUNTED_RATINGS),
                unauthentic=Count("id", filter=AUTHENTICITY_FLAGGED),
            )
        )

    def get_changelist(self, request, **kwargs):
        return FlaggedChangeList

    @admin.display(description="ratings (attention checks not counted)", ordering="ratings_count")
    def n_ratings(self, participant: Participant) -> int:
        return participant.ratings_count

    @admin.display(description="excluded by the declared rules")
    def declared_rules(self, participant: Participant) -> str:
        rules = getattr(participant, "declared_rules", None)
        if rules is None:
            return "-" if participant.is_preview else "no rating yet"
        return ", ".join(rules) or "kept"

    @admin.display(description="authenticity flag", boolean=True)
    def authenticity_flag(self, participant: Participant) -> bool:
        return bool(participant.unauthentic)


class FlaggedChangeList(ChangeList):
    """The participant list's page, each participant with their flags under their study's declared exclusion
    rules (`declared_rules`: the rules in words, [] kept, absent without a counted rating): the analysis's own
    computation, one query for the page (studies.selectors.participants_exclusion_flags)."""

    def get_results(self, request):
        super().get_results(request)
        flags = participants_exclusion_flags(list(self.result_list))
        for participant in self.result_list:
            found = flags.get(participant.pk)
            if found is not None:
                participant.declared_rules = found


# The study kinds' own admin pieces (their settings, instruments, situations) register beside these.
