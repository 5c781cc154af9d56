"""The authenticity review: each participant's score with its reasons, and the researcher's verdict on a flag
(confirmed or cleared, with who and when) through `studies.authenticity.authenticity_review`. Nothing here
changes a participant's status, answers or payment."""

from __future__ import annotations

from django.contrib import admin, messages

from .authenticity import authenticity_review
from .models import ParticipantAuthenticity


@admin.register(ParticipantAuthenticity)
class ParticipantAuthenticityAdmin(admin.ModelAdmin):
    list_display = ["participant", "study", "score", "flagged", "review", "reviewed_by", "reviewed_at"]
    list_filter = ["flagged", "review", "picture", "participant__study"]
    search_fields = ["participant__external_id"]
    list_select_related = ["participant__study", "reviewed_by"]
    readonly_fields = [
        "participant",
        "score",
        "flagged",
        "reasons",
        "picture",
        "client",
        "pages",
        "updated_at",
        "review",
        "reviewed_by",
        "reviewed_at",
    ]
    fields = readonly_fields
    actions = ["confirm_flag", "clear_flag"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="study", ordering="participant__study__slug")
    def study(self, row: ParticipantAuthenticity) -> str:
        return row.participant.study.slug

    def _review(self, request, queryset, decision: str) -> None:
        for row in queryset.select_related("participant"):
            authenticity_review(participant=row.participant, decision=decision, user=request.user)
        messages.success(request, f"{queryset.count()} participant(s) marked {decision}.")

    @admin.action(description="Review: confirm the flag (not an authentic participant)")
    def confirm_flag(self, request, queryset) -> None:
        self._review(request, queryset, ParticipantAuthenticity.Review.CONFIRMED)

    @admin.action(description="Review: clear the flag (an authentic participant)")
    def clear_flag(self, request, queryset) -> None:
        self._review(request, queryset, ParticipantAuthenticity.Review.CLEARED)
