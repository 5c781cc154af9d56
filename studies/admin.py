"""The researchers' admin: studies with their conditions and checks, corpus import, launch / pause / close,
a live status page, and read-mostly views of prompts, responses and participants.

Every state change goes through the services (studies.services, studies.importers), exactly as the terminal
commands do; every changelist selects its related rows up front (no query per row).
"""

from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.validators import validate_slug
from django.http import HttpRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from . import admin_authenticity, admin_extras  # noqa: F401 (admin_authenticity registers its admin)
from .admin_design import FrozenInlineFormSet, StudyAdminForm, StudyDesignAdminMixin, frozen_fields_lock
from .admin_extras import FriendlyProtectedDeleteInline
from .admin_forms import JSON_SETTING_FIELDS, expected_value_field
from .admin_markdown import markdown_formfield
from .admin_setup import StudySetupAdminMixin
from .admin_waves import StudyWavesAdminMixin
from .authenticity_models import NEW_STUDY_TRAPS
from .importers import CorpusImportError, corpus_import
from .kinds import kind_of, registered_kinds, resolved
from .kinds.base import TRAP_FIELDS
from .models import (
    AttentionCheck,
    Condition,
    Participant,
    Study,
)
from .platforms import platform_of
from .selectors import STATUSES, status_cell, study_flagged_participants, study_list_with_counts, study_status
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


def import_url(study: Study) -> str | None:
    """The corpus import for the study, when its kind takes a corpus (`StudyKind.corpus_import`) and it is a draft
    (an import goes into a draft only)."""
    if not kind_of(study).corpus_import or study.state != Study.State.DRAFT:
        return None
    return reverse("admin:studies_study_import") + "?" + urlencode({"study": study.slug})


# --- Study --------------------------------------------------------------------------------------------------


class ConditionInline(FriendlyProtectedDeleteInline, admin.TabularInline):
    model = Condition
    formset = FrozenInlineFormSet
    extra = 0
    protected_what = "a condition"
    protected_instead = "To stop it taking participants, untick “enrolling” instead."
    fields = ["name", "label", "kind", "is_baseline", "quota", "position", "enrolling"]


class AttentionCheckInline(FriendlyProtectedDeleteInline, admin.StackedInline):
    model = AttentionCheck
    formset = FrozenInlineFormSet
    extra = 0
    protected_what = "an attention check"

    def get_formset(self, request, obj=None, **kwargs):
        """The expected answer is chosen by its label on the study's scale (a new study's: the default)."""
        formset = super().get_formset(request, obj, **kwargs)
        formset.form.base_fields["expected_value"] = expected_value_field(obj.scale if obj else None)
        return formset

    fields = [
        ("after_item", "after_item_max", "expected_value", "emotion_label"),
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
class StudyAdmin(StudyDesignAdminMixin, StudyWavesAdminMixin, StudySetupAdminMixin, admin.ModelAdmin):
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
                    "quota_per_condition",
                    "attention_check_max_failures",
                    "time_limit_minutes",
                    "enrollments_per_address",
                    "seed",
                    "parent",
                    "rerate_share",
                    "family_exclusive",
                ]
            },
        ),
        ("Declared exclusion rules", {"fields": ["exclusion_rules"]}),
        (
            "Hypotheses and planned analysis (frozen at launch)",
            {"fields": ["hypotheses", "planned_analysis"]},
        ),
        (
            "Recruiting platform and outcomes",
            {
                "fields": [
                    "platform",
                    "platform_study_id",
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

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        """The study's JSON settings are edited as forms (studies/admin_forms.py), never typed as JSON; the texts
        participants read are Markdown (studies/admin_markdown.py)."""
        if (field := markdown_formfield(db_field, **kwargs)) is not None:
            return field
        if db_field.name in JSON_SETTING_FIELDS:
            field = JSON_SETTING_FIELDS[db_field.name]()
            field.label = db_field.verbose_name.capitalize()
            return field
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def get_fieldsets(self, request, obj=None):
        """The spine's fieldsets with the study kind's own after "What participants read", then the traps the
        kind offers (every registered kind's, each field once, on the add page, where the kind is still to be
        chosen)."""
        kinds = [kind_of(obj)] if obj is not None else list(registered_kinds())
        own = [fieldset for kind in kinds for fieldset in kind.admin_fieldsets]
        traps = [name for name in TRAP_FIELDS if any(name in kind.traps for kind in kinds)]
        return [*self.fieldsets[:2], *own, ("Authenticity traps", {"fields": traps}), *self.fieldsets[2:]]

    def get_inlines(self, request, obj):
        """The spine's inlines, then those the study's kind declares (`StudyKind.admin_inlines`)."""
        own = [resolved(path) for path in kind_of(obj).admin_inlines] if obj is not None else []
        return [*self.inlines, *own]

    def get_changeform_initial_data(self, request) -> dict:
        """A new study starts with the traps that cost people nothing (NEW_STUDY_TRAPS)."""
        return {**NEW_STUDY_TRAPS, **super().get_changeform_initial_data(request)}

    def get_form(self, request, obj=None, change=False, **kwargs):
        # A launched study's frozen fields (the exclusion rules among them: changing them once participants are
        # in would be choosing the rules after seeing the data) are shown read-only, each with its amendment link.
        form = super().get_form(request, obj, change=change, **kwargs)
        if obj is not None and obj.state != Study.State.DRAFT:
            frozen_fields_lock(form, obj)
        return form

    def get_readonly_fields(self, request, obj=None):
        """The kind of a launched study is shown, never offered: no amendment changes it."""
        fields = super().get_readonly_fields(request, obj)
        return [*fields, "kind"] if obj is not None and obj.state != Study.State.DRAFT else fields

    def has_delete_permission(self, request, obj=None):
        """A live or paused study is not offered for deletion (participants may be taking part): close it."""
        if obj is not None and obj.state in (Study.State.LIVE, Study.State.PAUSED):
            return False
        return super().has_delete_permission(request, obj)

    @admin.display(description="kind", ordering="kind")
    def kind_short(self, study: Study) -> str:
        return study.kind

    @admin.display(description="state", ordering="state")
    def state_badge(self, study: Study) -> str:
        # Colours in static/studies/admin.css: no style attributes (the admin runs under a strict CSP).
        return format_html(
            '<strong class="state-badge state-{}">{}</strong>', study.state, study.get_state_display()
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

    @admin.display(description="pages")
    def links(self, study: Study) -> str:
        # One link a line: side by side they were clipped off a 1280 px wide list. The kind decides which of
        # import and analysis a study has.
        imports, analysis = import_url(study), kind_of(study).analysis_url(study)
        return format_html(
            '<span class="study-links"><a href="{}">status</a>{}{}'
            '<a href="{}" target="_blank" rel="noopener">preview</a></span>',
            reverse("admin:studies_study_status", args=[study.pk]),
            format_html('<a href="{}">import</a>', imports) if imports else "",
            format_html('<a href="{}">analysis</a>', analysis) if analysis else "",
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
        confirmation = admin_extras.close_confirmation(self, request, queryset)
        if confirmation is not None:
            return confirmation
        self._transition(request, queryset, study_close, "close")

    # Extra pages.

    def get_urls(self):
        extra = [
            path("import/", self.admin_site.admin_view(self.import_view), name="studies_study_import"),
            path(
                "<int:pk>/status/", self.admin_site.admin_view(self.status_view), name="studies_study_status"
            ),
            path(
                "<int:pk>/state/<slug:verb>/",
                self.admin_site.admin_view(
                    lambda request, pk, verb: admin_extras.state_change_view(self, request, pk, verb)
                ),
                name="studies_study_state",
            ),
        ]
        return extra + self.setup_urls() + self.design_urls() + self.wave_urls() + super().get_urls()

    def import_view(self, request: HttpRequest):
        if not self.has_add_permission(request):
            raise PermissionDenied
        problems: list = []
        checked = ""
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
                        # The form stays as it was filled in, so the import is one untick away (browsers
                        # never keep a chosen file: the page asks for it again).
                        checked = result.summary()
                        form = ImportCorpusForm(initial={**request.POST.dict(), "dry_run": False})
                    else:
                        self.message_user(request, result.summary(), messages.SUCCESS)
                        # From the guided setup (?then=setup): back to its steps; else the study's page.
                        back = "setup" if request.GET.get("then") == "setup" else "change"
                        return HttpResponseRedirect(
                            reverse(f"admin:studies_study_{back}", args=[result.study.pk])
                        )
        else:
            form = ImportCorpusForm(initial={"study_slug": request.GET.get("study", ""), "seed": 0})
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Import corpus",
            "form": form,
            "problems": problems,
            "checked": checked,
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
            "has_rules": kind_of(study).exclusion_flags is not None,
            "flagged_people": study_flagged_participants(study=study),
        }
        return TemplateResponse(request, "admin/studies/study/status.html", context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = {**(extra_context or {}), "preview_url": None}
        study = self.get_object(request, object_id)
        if study is not None:
            extra_context["preview_url"] = preview_url(study)
            extra_context["participant_link"] = admin_extras.participant_link(request, study)
            extra_context["participant_link_where"] = platform_of(study).link_instructions
            extra_context["state_changes"] = admin_extras.state_changes_for(study)
            extra_context["analysis_url"] = kind_of(study).analysis_url(study)
            extra_context["bundle_url"] = kind_of(study).bundle_url(study)
            extra_context["import_url"] = import_url(study)
            # Generation's page: for the LLM conditions' responses, or for a kind whose models answer in their
            # own way (`StudyKind.generation_admin_view`).
            extra_context["generation_page"] = (
                kind_of(study).generation_admin_view is not None
                or study.conditions.filter(kind=Condition.Kind.LLM).exists()
            )
        return super().change_view(request, object_id, form_url, extra_context)


from . import admin_records  # noqa: E402,F401  (it registers its admins)
