"""Admin of providers (with a Test connection page: one cheap call through the adapter) and of the LLM
conditions' configurations (with a rendered example before anything is sent)."""

import re

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from generation.forms import (
    LLMConditionForm,
    ModelNameField,
    ProviderForm,
    model_field_for_provider,
    provider_key_status,
)
from generation.models import LLMConditionConfig, Provider
from generation.services import connection, prompts
from generation.services.conditions import llm_condition_save
from generation.services.connection import provider_models

#: An API root with a version in its path (/v1, /v1beta/openai/, …).
VERSIONED_PATH = re.compile(r"/v\d")


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    form = ProviderForm
    list_display = [
        "name",
        "kind",
        "base_url",
        "key_status",
        "requests_per_minute",
        "tokens_per_minute",
        "max_concurrency",
        "price_input_per_million",
        "price_output_per_million",
    ]
    fieldsets = [
        (None, {"fields": ["name", "kind", "base_url"]}),
        ("Key", {"fields": ["key_status", "api_key", "api_key_clear", "api_key_env"]}),
        (
            "Limits",
            {
                "fields": [
                    "requests_per_minute",
                    "tokens_per_minute",
                    "max_concurrency",
                    "timeout_seconds",
                    "max_attempts",
                ]
            },
        ),
        (
            "Prices (USD per million tokens)",
            {"fields": ["price_input_per_million", "price_output_per_million"]},
        ),
    ]
    readonly_fields = ["key_status"]
    change_form_template = "admin/generation/provider/change_form.html"

    def get_list_display(self, request):
        return [*super().get_list_display(request), "test_link"]

    @admin.display(description="Connection")
    def test_link(self, obj):
        return format_html(
            '<a href="{}">Test connection<span class="visually-hidden"> of {}</span></a>',
            reverse("admin:generation_provider_test", args=[obj.pk]),
            obj.name,
        )

    def get_urls(self):
        own = [
            path(
                "<int:pk>/test/",
                self.admin_site.admin_view(self.test_view),
                name="generation_provider_test",
            ),
            path(
                "<int:pk>/models/",
                self.admin_site.admin_view(self.models_view),
                name="generation_provider_models",
            ),
        ]
        return own + super().get_urls()

    def models_view(self, request, pk: int):
        """JSON: the models the provider lists, or why they could not be fetched (the model pickers ask it when the
        provider chosen in a form changes). `?fresh=1` asks the provider again instead of reusing its last list."""
        provider = get_object_or_404(Provider, pk=pk)
        if not self.has_view_permission(request, provider):
            raise PermissionDenied
        found = provider_models(provider=provider, fresh=request.GET.get("fresh") == "1")
        return JsonResponse({"models": found.models, "problem": found.problem})

    def test_view(self, request, pk: int):
        """GET: which model to ask (the first configured with this provider, by default). POST: ask it for a few
        tokens and show the model, the latency, or what to check. Never shows the key."""
        provider = get_object_or_404(Provider, pk=pk)
        if not self.has_view_permission(request, provider):
            return self._get_obj_does_not_exist_redirect(request, self.opts, str(pk))
        configured = list(
            LLMConditionConfig.objects.filter(provider=provider).values_list("model", flat=True).distinct()
        )
        model = (request.POST.get("model") if request.method == "POST" else request.GET.get("model")) or (
            configured[0] if configured else ""
        )
        result = None
        if request.method == "POST":
            if not self.has_change_permission(request, provider):  # a test call is paid for
                raise PermissionDenied
            result = connection.provider_connection_test(provider=provider, model=model)
        picker = ModelNameField(label="Model to ask", required=True)
        model_field_for_provider(picker, provider)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Test connection: {provider.name}",
            "provider": provider,
            "model": model,
            "configured": configured,
            "model_input": picker.widget.render("model", model, {"id": "id_model", "required": True}),
            "media": picker.widget.media,
            "key_status": provider_key_status(provider),
            "result": result,
            "opts": self.opts,
            "original": provider,
        }
        return TemplateResponse(request, "admin/generation/provider/test_connection.html", context)

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if obj.kind == "openai" and obj.base_url and not VERSIONED_PATH.search(obj.base_url):
            messages.warning(
                request,
                f"The base URL {obj.base_url} has no version in its path: OpenAI-compatible servers usually "
                "serve the API under /v1 (e.g. http://host:8000/v1). Use Test connection to check it.",
            )

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if db_field.name == "base_url":
            kwargs["assume_scheme"] = "https"  # a bare host name means https (and Django 6's default)
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    @admin.display(description="Key")
    def key_status(self, obj):
        # Where the key comes from: never the key itself.
        return provider_key_status(obj)


@admin.register(LLMConditionConfig)
class LLMConditionConfigAdmin(admin.ModelAdmin):
    form = LLMConditionForm
    list_display = [
        "condition",
        "provider",
        "model",
        "temperature",
        "max_tokens",
        "n_samples",
        "generation_link",
    ]
    list_filter = ["provider", "condition__study"]
    list_select_related = ["condition__study", "provider"]
    autocomplete_fields = []
    readonly_fields = ["generation_link", "rendered_example", "cost_estimate"]
    fieldsets = [
        (None, {"fields": ["condition", "provider", "model", "generation_link"]}),
        ("Decoding", {"fields": ["temperature", "top_p", "max_tokens", "seed", "n_samples"]}),
        ("Prompt", {"fields": ["system_prompt", "prompt_template", "rendered_example", "cost_estimate"]}),
    ]
    add_fieldsets = [
        (None, {"fields": ["condition", "new_study", "new_name", "new_label", "provider", "model"]}),
        *fieldsets[1:],
    ]

    def get_fieldsets(self, request, obj=None):
        return self.fieldsets if obj is not None else self.add_fieldsets

    def save_model(self, request, obj, form, change):
        """A new condition given on the form is added with its configuration, in one transaction."""
        study = None if change else form.cleaned_data.get("new_study")
        llm_condition_save(
            config=obj,
            study=study,
            name=form.cleaned_data.get("new_name", "") if study else "",
            label=form.cleaned_data.get("new_label", "") if study else "",
        )

    def response_add(self, request, obj, post_url_continue=None):
        # On to the saved configuration: its rendered prompt, its cost and the way on to generation.
        if "_addanother" not in request.POST and "_popup" not in request.POST:
            request.POST = request.POST.copy()
            request.POST["_continue"] = "1"
        return super().response_add(request, obj, post_url_continue)

    @admin.display(description="Generation")
    def generation_link(self, obj):
        if not obj or not obj.pk:
            return "Save to go on to generation."
        return format_html(
            '<a href="{}#condition-{}">Start or see generation<span class="visually-hidden"> of {}</span></a>',
            reverse("admin:generation_study", args=[obj.condition.study_id]),
            obj.condition.name,
            obj.condition,
        )

    @admin.display(description="What would be sent (first prompt of the study; nothing is sent from here)")
    def rendered_example(self, obj):
        if not obj or not obj.pk:
            return "Save to see the prompt rendered with the study's first prompt."
        try:
            example = prompts.generation_example(config=obj)
        except ValidationError as exc:
            return format_html('<p class="errornote">{}</p>', " ".join(exc.messages))
        if example["prompt"] is None:
            return "The study has no prompts yet."
        return format_html(
            "<p><strong>Prompt</strong> {} ({})</p>{}<p><strong>User message</strong></p>"
            '<pre style="white-space:pre-wrap">{}</pre>',
            example["prompt"].dialogue_id,
            example["prompt"].emotion.name,
            format_html(
                '<p><strong>System</strong></p><pre style="white-space:pre-wrap">{}</pre>', example["system"]
            )
            if example["system"]
            else "",
            example["user"],
        )

    @admin.display(description="Cost estimate for the slots not yet generated")
    def cost_estimate(self, obj):
        if not obj or not obj.pk:
            return "-"
        try:
            rows = prompts.generation_estimate(conditions=[obj.condition])
        except ValidationError as exc:
            return " ".join(exc.messages)
        if not rows:
            return "-"
        row = rows[0]
        return (
            f"{row['calls']} calls, ~{row['input_tokens']} input tokens + at most {row['output_tokens_max']} output "
            f"tokens: at most ${row['cost_max']:.4f}; at least {row['minutes_at_rate_limit']} min at the request limit."
        )
