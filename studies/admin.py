"""The researchers' admin: studies with their conditions and checks, corpus import, launch / pause / close,
a live status page, and read-mostly views of prompts, responses and participants.

Every state change goes through the services (studies.services, studies.importers), exactly as the terminal
commands do; every changelist selects its related rows up front (no query per row).
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.validators import validate_slug
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.module_loading import import_string
from django.utils.text import Truncator

from .admin_design import FrozenInlineFormSet, StudyAdminForm, StudyDesignAdminMixin
from .admin_waves import StudyWavesAdminMixin
from .importers import CorpusImportError, corpus_import
from .kinds import kind_of, registered_kinds
from .models import (
    Assignment,
    AttentionCheck,
    Condition,
    Emotion,
    Participant,
    Prompt,
    Response,
    Study,
)
from .selectors import STATUSES, status_cell, study_list_with_counts, study_status
from .services import (
    StudyLaunchError,
    StudyStateError,
    study_close,
    study_launch,
    study_pause,
    study_resume,
)

STATUS_REFRESH_SECONDS = 10
MAX_UPLOAD_BYTES = 50 * 1024 * 1024


def preview_url(study: Study) -> str:
    return f"/s/{study.slug}/?preview=1"


# --- Study --------------------------------------------------------------------------------------------------


class ConditionInline(admin.TabularInline):
    model = Condition
    formset = FrozenInlineFormSet
    extra = 0
    fields = ["name", "label", "kind", "is_baseline", "quota", "position", "enrolling"]


class AttentionCheckInline(admin.StackedInline):
    model = AttentionCheck
    formset = FrozenInlineFormSet
    extra = 0
    fields = [
        ("after_item", "expected_value", "emotion_label"),
        "situation",
        "speaker_utterance",
        "response_text",
    ]


class ImportCorpusForm(forms.Form):
    study_slug = forms.CharField(
        max_length=64,
        validators=[validate_slug],
        help_text="An existing draft study, or a new slug: a draft study is created.",
    )
    file = forms.FileField(
        help_text="CSV: the public dataset format (dialog_id, emotion, situation, speaker_uttr, "
        "response_<condition>…) or a raw EmpatheticDialogues file (conv_id, utterance_idx, context, prompt, …)."
    )
    sample = forms.IntegerField(
        required=False, min_value=1, help_text="Import only this many prompts, balanced over emotions."
    )
    seed = forms.IntegerField(initial=0, required=False, help_text="Seed of the sample.")
    conditions = forms.CharField(
        required=False, help_text="Comma-separated response columns to import (blank: all), e.g. human,gpt4."
    )
    replace = forms.BooleanField(
        required=False, help_text="Delete the draft study's prompts and responses before importing."
    )
    dry_run = forms.BooleanField(
        required=False, label="Check only", help_text="Check the file and the import, then write nothing."
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(f"The file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB.")
        return upload

    def clean_conditions(self) -> list[str] | None:
        names = [n.strip() for n in self.cleaned_data["conditions"].split(",") if n.strip()]
        return names or None


@admin.register(Study)
class StudyAdmin(StudyDesignAdminMixin, StudyWavesAdminMixin, admin.ModelAdmin):
    form = StudyAdminForm
    list_display = [
        "title",
        "slug",
        "kind_short",
        "state_badge",
        "n_conditions",
        "n_prompts",
        "n_participants",
        "links",
    ]
    list_filter = ["state", "kind", "platform"]
    search_fields = ["slug", "title"]
    prepopulated_fields = {"slug": ["title"]}
    readonly_fields = ["state", "created_at", "launched_at", "closed_at", "participant_preview", "parent"]
    inlines = [ConditionInline, AttentionCheckInline]  # every kind's; `get_inlines` adds the study kind's
    actions = ["launch_selected", "pause_selected", "resume_selected", "close_selected", "duplicate_selected"]
    save_on_top = True
    fieldsets = [
        (None, {"fields": ["title", "slug", "kind", "state", "description", "participant_preview"]}),
        ("What participants read", {"fields": ["consent_text", "instructions_text"]}),
        # Then the study kind's own fieldsets (`StudyKind.admin_fieldsets`, see get_fieldsets).
        (
            "Design",
            {
                "fields": [
                    "items_per_participant",
                    "target_ratings_per_response",
                    "quota_per_condition",
                    "attention_check_max_failures",
                    "time_limit_minutes",
                    "seed",
                    "parent",
                    "rerate_share",
                    "family_exclusive",
                ]
            },
        ),
        (
            "Hypotheses and planned analysis (frozen at launch)",
            {"fields": ["hypotheses", "planned_analysis"]},
        ),
        (
            "Recruiting platform and outcomes",
            {
                "fields": [
                    "platform",
                    "completion_code",
                    "screened_out_code",
                    "failed_checks_code",
                    "completion_redirect_url",
                ]
            },
        ),
        ("Dates", {"fields": ["created_at", "launched_at", "closed_at"]}),
    ]

    def get_queryset(self, request):
        return study_list_with_counts()

    def get_fieldsets(self, request, obj=None):
        """The spine's fieldsets with the study kind's own after "What participants read" (every registered
        kind's on the add page, where the kind is still to be chosen)."""
        kinds = [kind_of(obj)] if obj is not None else list(registered_kinds())
        own = [fieldset for kind in kinds for fieldset in kind.admin_fieldsets]
        return [*self.fieldsets[:2], *own, *self.fieldsets[2:]]

    def get_inlines(self, request, obj):
        """The spine's inlines, then those the study's kind declares (`StudyKind.admin_inlines`)."""
        own = [import_string(path) for path in kind_of(obj).admin_inlines] if obj is not None else []
        return [*self.inlines, *own]

    @admin.display(description="kind", ordering="kind")
    def kind_short(self, study: Study) -> str:
        return study.kind

    @admin.display(description="state", ordering="state")
    def state_badge(self, study: Study) -> str:
        colours = {"draft": "#6b7280", "live": "#15803d", "paused": "#b45309", "closed": "#1f2937"}
        return format_html(
            '<strong style="color:#fff;background:{};padding:2px 8px;border-radius:9px">{}</strong>',
            colours.get(study.state, "#6b7280"),
            study.get_state_display(),
        )

    @admin.display(description="conditions", ordering="n_conditions")
    def n_conditions(self, study: Study) -> int:
        return study.n_conditions

    @admin.display(description="prompts", ordering="n_prompts")
    def n_prompts(self, study: Study) -> int:
        return study.n_prompts

    @admin.display(description="participants", ordering="n_participants")
    def n_participants(self, study: Study) -> int:
        return study.n_participants

    @admin.display(description="")
    def links(self, study: Study) -> str:
        return format_html(
            '<a href="{}">status</a> · <a href="{}">import</a> · <a href="{}" target="_blank" rel="noopener">preview</a>',
            reverse("admin:studies_study_status", args=[study.pk]),
            reverse("admin:studies_study_import") + f"?study={study.slug}",
            preview_url(study),
        )

    @admin.display(description="Preview as participant")
    def participant_preview(self, study: Study) -> str:
        if not study.pk:
            return "-"
        return format_html(
            '<a href="{0}" target="_blank" rel="noopener">{0}</a> (not counted in any figure)',
            preview_url(study),
        )

    # Launch / pause / resume / close: the services decide; errors become admin messages.

    def _transition(self, request, queryset, service, verb: str):
        for study in queryset:
            try:
                service(study=study)
            except StudyLaunchError as exc:
                self.message_user(
                    request,
                    format_html(
                        "Cannot launch “{}”: {}",
                        study.slug,
                        format_html("<br>".join(["{}"] * len(exc.problems)), *exc.problems),
                    ),
                    messages.ERROR,
                )
            except StudyStateError as exc:
                self.message_user(request, str(exc), messages.ERROR)
            else:
                self.message_user(request, f"“{study.slug}” is now {study.state}.", messages.SUCCESS)

    @admin.action(description="Launch selected draft studies")
    def launch_selected(self, request, queryset):
        self._transition(request, queryset, study_launch, "launch")

    @admin.action(description="Pause selected live studies")
    def pause_selected(self, request, queryset):
        self._transition(request, queryset, study_pause, "pause")

    @admin.action(description="Resume selected paused studies")
    def resume_selected(self, request, queryset):
        self._transition(request, queryset, study_resume, "resume")

    @admin.action(description="Close selected studies (for good)")
    def close_selected(self, request, queryset):
        self._transition(request, queryset, study_close, "close")

    # Extra pages.

    def get_urls(self):
        extra = [
            path("import/", self.admin_site.admin_view(self.import_view), name="studies_study_import"),
            path(
                "<int:pk>/status/", self.admin_site.admin_view(self.status_view), name="studies_study_status"
            ),
        ]
        return extra + self.design_urls() + self.wave_urls() + super().get_urls()

    def import_view(self, request: HttpRequest):
        if not self.has_add_permission(request):
            raise PermissionDenied
        problems: list = []
        if request.method == "POST":
            form = ImportCorpusForm(request.POST, request.FILES)
            if form.is_valid():
                data = form.cleaned_data
                try:
                    result = corpus_import(
                        study_slug=data["study_slug"],
                        data=data["file"].read(),
                        sample=data["sample"],
                        seed=data["seed"] or 0,
                        conditions=data["conditions"],
                        replace=data["replace"],
                        dry_run=data["dry_run"],
                    )
                except CorpusImportError as exc:
                    problems = exc.problems
                else:
                    if result.dry_run:
                        self.message_user(request, result.summary(), messages.SUCCESS)
                        return HttpResponseRedirect(
                            reverse("admin:studies_study_import") + f"?study={result.study.slug}"
                        )
                    self.message_user(request, result.summary(), messages.SUCCESS)
                    return HttpResponseRedirect(reverse("admin:studies_study_change", args=[result.study.pk]))
        else:
            form = ImportCorpusForm(initial={"study_slug": request.GET.get("study", ""), "seed": 0})
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Import corpus",
            "form": form,
            "problems": problems,
            "draft_studies": Study.objects.filter(state=Study.State.DRAFT).order_by("slug"),
        }
        return TemplateResponse(
            request, "admin/studies/study/import_corpus.html", context, status=400 if problems else 200
        )

    def status_view(self, request: HttpRequest, pk: int):
        study = get_object_or_404(Study, pk=pk)
        if not self.has_view_permission(request, study):
            raise PermissionDenied
        status = study_status(study=study)
        keys = [column["key"] for column in status["columns"]]
        for condition in status["conditions"]:
            condition["kind_cells"] = [status_cell(condition, key) for key in keys]
            hist = condition.get("ratings_per_response", {}).get("histogram", {})
            top = max(hist.values(), default=0)
            condition["histogram_rows"] = [
                {"ratings": k, "responses": v, "width": round(100 * v / top) if top else 0}
                for k, v in sorted(hist.items(), key=lambda kv: int(kv[0]))
            ]
            condition["status_counts"] = [condition["participants"][s] for s in STATUSES]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": study,
            "title": f"Live status: {study.title}",
            "status": status,
            "statuses": [Participant.Status(s).label for s in STATUSES],
            "totals": [status["totals"]["participants"][s] for s in STATUSES],
            "unassigned": [status["participants_without_condition"][s] for s in STATUSES],
            "kind_totals": [
                status_cell(status["totals"], key) if key in status["totals"] else "" for key in keys
            ],
            "show_spread": any("ratings_per_response" in c for c in status["conditions"]),
            "refresh_seconds": STATUS_REFRESH_SECONDS,
            "preview_url": preview_url(study),
        }
        return TemplateResponse(request, "admin/studies/study/status.html", context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = {**(extra_context or {}), "preview_url": None}
        study = self.get_object(request, object_id)
        if study is not None:
            extra_context["preview_url"] = preview_url(study)
        return super().change_view(request, object_id, form_url, extra_context)


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
    readonly_fields = ["prompt", "condition", "sample_index", "source", "created_at", "updated_at"]
    fields = ["prompt", "condition", "sample_index", "text", "source", "review", "review_flags"]
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

    @admin.action(description="Approve selected responses after review")
    def approve_selected(self, request, queryset):
        n = queryset.filter(review=Response.Review.FLAGGED).update(review=Response.Review.APPROVED)
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
        "is_preview",
        "n_ratings",
        "started_at",
        "last_seen_at",
    ]
    list_filter = ["study", "status", "flagged_for_exclusion", "is_preview", "platform", "condition__name"]
    search_fields = ["external_id", "platform_session_id", "mturk_assignment_id"]
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
        "mturk_assignment_id",
        "mturk_hit_id",
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

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(ratings_count=Count("assignments__rating", filter=Q(assignments__rating__isnull=False)))
        )

    @admin.display(description="ratings", ordering="ratings_count")
    def n_ratings(self, participant: Participant) -> int:
        return participant.ratings_count


# The study kinds' own admin pieces (their settings, instruments, situations) register beside these.
from . import admin_kinds  # noqa: E402,F401
