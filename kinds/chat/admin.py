"""The chat kind's admin pieces: its settings on the study page (named by `StudyKind.admin_inlines` in
kinds/chat/kind.py), and its conversations' turns, read-only, for the researcher."""

from __future__ import annotations

from django.contrib import admin

from studies.admin_design import FrozenInlineFormSet

from .models import ChatSettings, Conversation, Turn


class ChatSettingsInline(admin.StackedInline):
    model = ChatSettings
    fk_name = "study"
    formset = FrozenInlineFormSet  # frozen with the design at launch: a change is refused on the page
    can_delete = False
    max_num = 1
    min_num = 1
    verbose_name = "chat settings"
    verbose_name_plural = "chat settings"
    fields = [
        "opening",
        ("min_turns", "max_turns"),
        ("min_chars", "max_chars"),
        "min_reply_wait_ms",
        "labels",
        "debrief_text",
        "scale_question",
        "scale",
        "ask_free_text",
        "fallback_condition",
        ("token_cap_per_participant", "budget_usd"),
        "person_reply_seconds",
        "support_resources",
        "moderation_provider",
    ]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        """The fallback is one of this study's conditions."""
        if db_field.name == "fallback_condition":
            study_id = request.resolver_match.kwargs.get("object_id") if request.resolver_match else None
            field = super().formfield_for_foreignkey(db_field, request, **kwargs)
            if study_id is not None:
                field.queryset = field.queryset.filter(study_id=study_id)
            return field
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class TurnInline(admin.TabularInline):
    model = Turn
    extra = 0
    can_delete = False
    fields = [
        "index",
        "role",
        "status",
        "text",
        "condition",
        "model",
        "sent_at",
        "completed_at",
        "finish_reason",
        "safety",
    ]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = [
        "participant", "condition", "label", "state", "fallback_used", "crisis_count", "closed_by", "created_at"
    ]  # fmt: skip
    list_filter = [
        "state",
        "label",
        "fallback_used",
        "closed_by",
        ("crisis_shown_at", admin.EmptyFieldListFilter),
    ]
    readonly_fields = [f.name for f in Conversation._meta.fields]
    inlines = [TurnInline]

    def has_add_permission(self, request):
        return False
