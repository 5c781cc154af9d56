"""Admin: providers, LLM condition configurations (with a rendered example before anything is sent), a per-study
generation page (start, cancel, retry failed, live progress, spend, length statistics) and the review queue of
generated responses (approve, edit with an audit trail, regenerate). Every action calls a generation service
(generation.services.*) or selector."""

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import ValidationError
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from generation import batches, questionnaire, selectors
from generation.models import (
    GeneratedResponse,
    GenerationAttempt,
    GenerationBatch,
    GenerationItem,
    GenerationJob,
    ResponseEdit,
    ResponseProvenance,
    StudyBudget,
)
from generation.providers.registry import placeholder_kinds
from generation.services import dispatch, prompts, review
from generation.services.prompts import REVEALS_MODEL
from generation.services.running import SAME_TEXT_FLAG
from studies.kinds import kind_of, resolved
from studies.models import Condition, Study
from studies.reply_review import SAME_AS_OTHER_CONDITION


class GenerationAttemptInline(admin.TabularInline):
    model = GenerationAttempt
    extra = 0
    can_delete = False
    fields = [
        "number",
        "outcome",
        "error_kind",
        "http_status",
        "retry_after",
        "latency_ms",
        "error",
        "started_at",
    ]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(GenerationItem)
class GenerationItemAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "condition",
        "prompt",
        "sample_index",
        "status",
        "attempts",
        "error_kind",
        "cost",
        "updated_at",
    ]
    list_filter = ["status", "error_kind", "condition__study", "condition"]
    list_select_related = ["condition__study", "prompt__emotion"]
    search_fields = ["prompt__dialogue_id", "last_error"]
    readonly_fields = [f.name for f in GenerationItem._meta.fields]
    inlines = [GenerationAttemptInline]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(GenerationJob)
class GenerationJobAdmin(admin.ModelAdmin):
    """The log of generation starts; its changelist links to the per-study generation pages."""

    list_display = [
        "condition",
        "status",
        "started_by",
        "via",
        "created_at",
        "cancelled_at",
        "stopped_reason",
    ]
    list_filter = ["status", "condition__study"]
    readonly_fields = list_display  # a log: every column is read-only

    def has_add_permission(self, request):
        return False

    def get_urls(self):
        urls = [
            path("studies/", self.admin_site.admin_view(self.studies_view), name="generation_studies"),
            path(
                "study/<int:study_id>/", self.admin_site.admin_view(self.study_view), name="generation_study"
            ),
        ]
        return urls + super().get_urls()

    def changelist_view(self, request, extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "generation_studies_url": reverse("admin:generation_studies"),
        }
        return super().changelist_view(request, extra_context=extra_context)

    def studies_view(self, request):
        studies = Study.objects.filter(conditions__kind=Condition.Kind.LLM).distinct().order_by("-created_at")
        context = {
            **self.admin_site.each_context(request),
            "title": "Generate LLM responses",
            "studies": studies,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/generation/studies.html", context)

    def study_view(self, request, study_id: int):
        if not request.user.has_perm("generation.add_generationjob") and not request.user.is_superuser:
            messages.error(request, "You may not run generation.")
            return HttpResponseRedirect(reverse("admin:index"))
        study = get_object_or_404(Study, pk=study_id)
        own_view = kind_of(study).generation_admin_view  # a kind whose models answer in their own way
        if own_view is not None:
            return resolved(own_view)(self, request, study)
        if request.method == "POST":
            return self._study_action(request, study)
        progress = selectors.generation_progress(study=study)
        conditions = [row["condition"] for row in progress]
        examples = []
        for row in progress:
            if row["config"] is None:
                continue
            try:
                examples.append((row["name"], prompts.generation_example(config=row["config"])))
            except ValidationError as exc:
                examples.append((row["name"], {"error": " ".join(exc.messages)}))
        try:
            estimate = prompts.generation_estimate(conditions=conditions)
        except ValidationError:
            estimate = []
        busy = any(row["pending"] or row["running"] for row in progress)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Generation: {study.title}",
            "study": study,
            "progress": progress,
            "problems": prompts.generation_problems(conditions=conditions) if conditions else [],
            "estimate": estimate,
            "estimate_total": sum((row["cost_max"] for row in estimate), start=0),
            "examples": examples,
            "lengths": selectors.response_length_stats(study=study),
            "busy": busy,
            "batches": GenerationBatch.objects.filter(condition__study=study).select_related("condition"),
            "judges": selectors.judges_of(study=study),
            "opts": self.model._meta,
            "review_url": reverse("admin:generation_generatedresponse_changelist")
            + f"?condition__study__id__exact={study.id}&review__exact=flagged",
        }
        return TemplateResponse(request, "admin/generation/study.html", context)

    def _questionnaire_view(self, request, study):
        """EmotionBench LLM subjects: runs stored per condition, and sending the missing ones to the workers."""
        if request.method == "POST":
            try:
                sent = questionnaire.questionnaire_dispatch(
                    study=study, condition_name=request.POST.get("condition") or None
                )
                messages.success(request, f"Sent {sent} runs to the workers.")
            except questionnaire.QuestionnaireGenerationError as exc:
                messages.error(request, f"The runs could not start: {exc}")
            return HttpResponseRedirect(reverse("admin:generation_study", args=[study.id]))
        progress = questionnaire.questionnaire_progress(study=study)
        context = {
            **self.admin_site.each_context(request),
            "title": f"LLM subjects: {study.title}",
            "study": study,
            "progress": progress,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/generation/questionnaire_study.html", context)

    def _study_action(self, request, study):
        action = request.POST.get("action")
        name = request.POST.get("condition") or None
        back = HttpResponseRedirect(reverse("admin:generation_study", args=[study.id]))
        try:
            conditions = prompts.generation_conditions(study=study, condition_name=name)
            if action == "start":
                result = dispatch.generation_start(
                    study=study, conditions=conditions, started_by=request.user.get_username(), via="admin"
                )
                messages.success(
                    request,
                    f"Started: {result.created} new items, {result.dispatched} sent to the workers.",
                )
            elif action == "cancel":
                count = dispatch.generation_cancel(conditions=conditions)
                messages.success(request, f"Cancelled {count} pending items (calls in flight still finish).")
            elif action == "batch_submit":
                submitted = batches.batch_submit(
                    study=study, conditions=conditions, started_by=request.user.get_username(), via="admin"
                )
                messages.success(
                    request,
                    f"Submitted {sum(b.items_total for b in submitted)} items in {len(submitted)} batches "
                    "(results within 24 hours, at half price).",
                )
            elif action == "batch_poll":
                for batch in GenerationBatch.objects.filter(
                    condition__in=conditions, status=GenerationBatch.Status.SUBMITTED
                ):
                    batches.batch_poll(batch=batch)
                messages.success(request, "Checked the open batches.")
            elif action == "retry_failed":
                ids = dispatch.generation_retry_failed(
                    conditions=conditions, started_by=request.user.get_username(), via="admin"
                )
                messages.success(request, f"Retrying {len(ids)} failed items.")
            else:
                messages.error(request, f"Unknown action {action!r}.")
        except prompts.GenerationSetupError as exc:
            messages.error(request, f"Generation could not start: {exc}")
        return back


#: How the review queue words a response's flags (the stored flags are short names).
FLAG_LABELS = {
    SAME_TEXT_FLAG: "same text again after regenerating (change the seed or edit the text)",
    SAME_AS_OTHER_CONDITION: "the same as another condition's reply to this prompt (approve, edit or replace)",
    REVEALS_MODEL: "reveals the model (it says it is an AI)",
}


class ResponseEditInline(admin.TabularInline):
    model = ResponseEdit
    fk_name = "response"
    extra = 0
    can_delete = False
    fields = ["edited_at", "editor_username", "before", "after", "note"]
    readonly_fields = fields
    verbose_name_plural = "Edit history"

    def has_add_permission(self, request, obj=None):
        return False


class ProvenanceInline(admin.StackedInline):
    model = ResponseProvenance
    fk_name = "response"
    extra = 0
    can_delete = False
    fields = [
        "provider_name",
        "model_requested",
        "model_returned",
        "system_fingerprint",
        "finish_reason",
        "input_tokens",
        "output_tokens",
        "cost",
        "latency_ms",
        "attempts",
        "requested_at",
        "completed_at",
        "superseded_at",
        "request",
        "raw_response",
    ]
    readonly_fields = fields
    verbose_name_plural = "Provenance"

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(GeneratedResponse)
class GeneratedResponseAdmin(admin.ModelAdmin):
    """Review queue: flagged responses first. Saving a changed text records who changed what (ResponseEdit)."""

    list_display = [
        "id",
        "condition",
        "model_shown",
        "prompt_shown",
        "excerpt",
        "words",
        "review",
        "flags",
        "source",
    ]
    list_filter = ["review", "source", "condition__study", "condition"]
    list_select_related = ["condition__study", "prompt"]
    search_fields = ["text", "prompt__dialogue_id"]
    fields = ["context", "text", "edit_note", "source", "review", "flags"]
    readonly_fields = ["context", "source", "review", "flags", "edit_note"]
    inlines = [ResponseEditInline, ProvenanceInline]
    actions = ["approve", "regenerate"]

    def get_queryset(self, request):
        # Each row's model: prefetched (a select_related through the reverse one-to-one loses the condition).
        queryset = super().get_queryset(request).filter(condition__kind=Condition.Kind.LLM)
        return queryset.prefetch_related("condition__llm_config__provider")

    def has_add_permission(self, request):
        return False

    class Media:
        css = {"all": ["studies/admin.css"]}

    @admin.display(description="Prompt")
    def prompt_shown(self, obj):
        """What the model answered: the situation and what the speaker said (the dialogue id beside them)."""
        prompt = obj.prompt
        said = (
            prompt.speaker_utterance
            if len(prompt.speaker_utterance) <= 120
            else prompt.speaker_utterance[:117] + "…"
        )
        return format_html("{} <small>({})</small>", said or prompt.situation[:120], prompt.dialogue_id)

    @admin.display(description="Model")
    def model_shown(self, obj):
        config = getattr(obj.condition, "llm_config", None)
        if config is None:
            return "-"
        if config.provider.kind in placeholder_kinds():
            return format_html(
                '<strong class="placeholder-mark">{}</strong>', "Test model: placeholder reply"
            )
        return f"{config.provider.name} / {config.model}"

    @admin.display(description="Text")
    def excerpt(self, obj):
        return obj.text if len(obj.text) <= 90 else obj.text[:87] + "…"

    @admin.display(description="Words")
    def words(self, obj):
        return selectors.words_count(obj.text)

    @admin.display(description="Flags")
    def flags(self, obj):
        return ", ".join(FLAG_LABELS.get(f, f) for f in obj.review_flags or []) or "-"

    @admin.display(description="Prompt")
    def context(self, obj):
        prompt = obj.prompt
        return format_html(
            "<p><strong>{}</strong> — {}</p><p><em>{}</em></p>",
            prompt.emotion.name,
            prompt.situation,
            prompt.speaker_utterance,
        )

    @admin.display(description="Edits")
    def edit_note(self, obj):
        edits = list(obj.edits.all()) if obj and obj.pk else []
        if not edits:
            return "Saving a changed text records the edit (who, when, before and after) and approves it."
        return format_html_join(
            "",
            "<p>{} by {}</p>",
            ((e.edited_at.strftime("%Y-%m-%d %H:%M"), e.editor_username) for e in edits),
        )

    def save_model(self, request, obj, form, change):
        # Through the service, so the audit trail cannot be skipped; never a plain save of the text.
        if change and "text" in form.changed_data:
            try:
                review.response_edit(response=obj, text=form.cleaned_data["text"], user=request.user)
            except ValidationError as exc:
                messages.error(request, " ".join(exc.messages))

    @admin.action(description="Approve the selected responses")
    def approve(self, request, queryset):
        """Approves at once, unless some selected responses say they are an AI ("reveals the model"): then a page
        lists those and asks first (a participant reading one would know the condition)."""
        revealing = [r for r in queryset.select_related("prompt") if REVEALS_MODEL in (r.review_flags or [])]
        if revealing and request.POST.get("confirm") != "yes":
            context = {
                **self.admin_site.each_context(request),
                "title": "Approve responses that reveal the model?",
                "opts": self.opts,
                "revealing": revealing,
                "selected": request.POST.getlist(ACTION_CHECKBOX_NAME),
                "select_across": request.POST.get("select_across", "0"),
                "count": queryset.count(),
            }
            return TemplateResponse(request, "admin/generation/approve_confirm.html", context)
        for response in queryset:
            review.response_approve(response=response)
        messages.success(request, f"Approved {queryset.count()} responses.")
        return None

    @admin.action(description="Regenerate the selected responses (ask the model again)")
    def regenerate(self, request, queryset):
        done = 0
        seeds = set()
        for response in queryset.select_related("condition__llm_config"):
            try:
                review.response_regenerate(response=response)
                done += 1
            except ValidationError as exc:
                messages.error(request, " ".join(exc.messages))
                continue
            config = getattr(response.condition, "llm_config", None)
            if config is not None and config.seed is not None:
                seeds.add((response.condition.name, config.seed))
        if done:
            messages.success(
                request, f"Regenerating {done} responses; the new text replaces the old when it arrives."
            )
        for name, seed in sorted(seeds):
            messages.warning(
                request,
                f"Condition {name} sends the fixed seed {seed}, so the provider may return the same text; if it "
                "does, the response is flagged “same text again” and you can change the seed or edit the text.",
            )


# Registered in their own modules: the providers' and configurations' admins, the LLM judges' admin.
from generation import admin_providers, judge_admin  # noqa: E402, F401


@admin.register(StudyBudget)
class StudyBudgetAdmin(admin.ModelAdmin):
    """A study's live-call limits (generation/budget.py): the cap and the per-participant tokens are set here;
    what is spent and held is kept by the calls themselves."""

    list_display = ("study", "cap", "spent", "reserved", "participant_token_cap")
    readonly_fields = ("spent", "reserved")
    autocomplete_fields = ("study",)
