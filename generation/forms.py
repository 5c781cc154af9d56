"""Form pieces for providers and models, reusable wherever a researcher sets up an LLM condition (the admin, a
study wizard):

* `ProviderForm`: a provider with its key typed in (write-only: a password input that is never filled back in,
  "a key is set" with replace / remove), sealed with the endpoint it is for (studies.sealed);
* `ProviderChoiceField`: a provider picked from the list, by name;
* `ModelNameField` / `ModelNameInput`: the model picked from the provider's own list (`provider_models`) in a text
  input with a list of suggestions, so a name can still be typed when the list cannot be fetched (the field's help
  says why). `model_field_for_provider(field, provider)` fills it for a chosen provider. With JavaScript
  (static/generation/model_picker.js) the list follows the provider chosen in the same form.
"""

from __future__ import annotations

import os

from django import forms
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from generation.design import provider_edit_problems
from generation.keys import provider_origin
from generation.models import LLMConditionConfig, Provider
from generation.services.connection import provider_models
from studies.design import frozen_message, is_frozen
from studies.models import Condition, Study
from studies.sealed import SealedKeyError, key_seal, key_store_problem, sealed_origin


def provider_key_status(provider: Provider | None) -> str:
    """Where a provider's key comes from, in words (never the key)."""
    if provider is None:
        return "No key yet."
    if provider.api_key_sealed:
        try:
            return f"A key is set (entered here, sent only to {sealed_origin(provider.api_key_sealed)})."
        except SealedKeyError as exc:
            return str(exc)
    if provider.api_key_env:
        state = "set" if os.environ.get(provider.api_key_env) else "NOT set in this server's environment"
        return f"From the environment variable {provider.api_key_env} ({state})."
    return "No key: requests are sent without one (an endpoint of your own that needs none)."


class ProviderForm(forms.ModelForm):
    """A provider, its key typed in or named by an environment variable (or none). The key typed is sealed with
    the endpoint (scheme, host, port) the provider sends to; it is never put back in the page. A provider named by a launched study's
    frozen design keeps its name, kind and base URL (the model guard refuses them too; this says why)."""

    api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password", "size": 50}),
        help_text="Typed once, stored encrypted, never shown again, and sent only to this provider's address. "
        "Leave blank to keep the key that is set.",
    )
    api_key_clear = forms.BooleanField(label="Remove the stored key", required=False)

    class Meta:
        model = Provider
        fields = [
            "name", "kind", "base_url", "api_key_env", "max_concurrency", "requests_per_minute",
            "tokens_per_minute", "price_input_per_million", "price_output_per_million", "timeout_seconds",
            "max_attempts",
        ]  # fmt: skip

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        stored = bool(self.instance.pk and self.instance.api_key_sealed)
        if not stored:
            self.fields["api_key_clear"].widget = forms.HiddenInput()
        if problem := key_store_problem():
            self.fields["api_key"].help_text = problem

    def clean(self):
        cleaned = super().clean()
        for problem in provider_edit_problems(self.instance, self.changed_data):
            self.add_error(None, problem)
        typed = cleaned.get("api_key") or ""
        clear = cleaned.get("api_key_clear")
        if typed and clear:
            self.add_error("api_key_clear", "Either type a new key or remove the stored one, not both.")
            return cleaned
        if "kind" not in cleaned or "base_url" not in cleaned:
            return cleaned  # refused already; the host is unknown
        origin = provider_origin(kind=cleaned["kind"], base_url=cleaned["base_url"])
        sealed = self.instance.api_key_sealed
        if typed:
            if problem := key_store_problem():
                self.add_error("api_key", problem)
                return cleaned
            sealed = key_seal(key=typed, origin=origin)
        elif clear:
            sealed = ""
        elif sealed:
            try:
                stored_origin = sealed_origin(sealed)
            except SealedKeyError as exc:
                stored_origin = None
                self.add_error("api_key", str(exc))
            if stored_origin is not None and stored_origin != origin:
                self.add_error(
                    "api_key",
                    f"The stored key was entered for {stored_origin}, and the provider now sends to "
                    f"{origin or 'nowhere'}. A key is only ever sent where it was entered for: type it again for "
                    "the new address, or remove it.",
                )
        if sealed and cleaned.get("api_key_env"):
            self.add_error(
                "api_key_env",
                "A key is entered above: leave the environment variable blank (a provider's key comes from one "
                "place), or remove the stored key.",
            )
        self.instance.api_key_sealed = sealed
        return cleaned


class ProviderChoiceField(forms.ModelChoiceField):
    """A provider picked from the list of providers, by name."""

    def __init__(self, queryset=None, **kwargs):
        super().__init__(queryset=Provider.objects.all() if queryset is None else queryset, **kwargs)

    def label_from_instance(self, obj: Provider) -> str:
        return obj.name


class ModelNameInput(forms.TextInput):
    """A text input with the provider's models as suggestions (an HTML datalist: picked from the list, or typed)
    and, when the list could not be fetched, why. `data-models-url` tells the script where to ask for another
    provider's list."""

    class Media:
        js = ["generation/model_picker.js"]

    def __init__(self, attrs=None):
        super().__init__({"size": 40, "autocomplete": "off", **(attrs or {})})
        self.provider: Provider | None = None  # whose list to offer: asked for when the field is shown

    def render(self, name, value, attrs=None, renderer=None):
        found = provider_models(provider=self.provider) if self.provider is not None else None
        models, problem = (found.models, found.problem) if found else ([], "")
        attrs = dict(attrs or {})
        list_id = f"{attrs.get('id') or 'id_' + name}-models"
        attrs["list"] = list_id
        attrs["data-model-picker"] = "1"
        note_id = f"{list_id}-note"
        attrs["aria-describedby"] = " ".join(filter(None, [attrs.get("aria-describedby"), note_id]))
        field = super().render(name, value, attrs, renderer)
        options = format_html_join("", '<option value="{}">', ((m,) for m in models))
        if models:
            note = f"{len(models)} models listed by the provider: pick one, or type a name."
        else:
            note = problem or "Choose a provider to see its models, or type the model's name."
        return format_html(
            '<div class="model-picker">{}<datalist id="{}">{}</datalist>'
            '<div class="help" id="{}" data-model-note="1">{}</div></div>',
            field,
            list_id,
            options,
            note_id,
            note,
        )


class ModelNameField(forms.CharField):
    widget = ModelNameInput

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 200)
        super().__init__(**kwargs)


def model_field_for_provider(
    field: forms.Field, provider: Provider | None, *, provider_field: str = ""
) -> None:
    """Give a model field (a ModelNameInput) the provider's own list, or the reason it has none (asked for when
    the field is rendered, so a form that is only validated asks nothing); with `provider_field` (the name of the
    form's provider select) the script refreshes the list when it changes."""
    widget = field.widget
    if not isinstance(widget, ModelNameInput):
        field.widget = widget = ModelNameInput()
    widget.attrs["data-models-url"] = reverse("admin:generation_provider_models", args=[0]).replace(
        "/0/", "/{}/"
    )
    if provider_field:
        widget.attrs["data-provider-field"] = provider_field
    widget.provider = provider


class LLMConditionForm(forms.ModelForm):
    """An LLM condition's configuration; on a new one, the condition may be added here too (a study and a name),
    so that it is created and configured in one place. The provider is picked from the list, the model from the
    provider's own list (or typed)."""

    new_study = forms.ModelChoiceField(
        queryset=Study.objects.order_by("-created_at"),
        required=False,
        label="Or add a new LLM condition to study",
        help_text="Instead of picking an existing condition above: the condition is created with this "
        "configuration.",
    )
    new_name = forms.SlugField(
        required=False, max_length=64, label="New condition's name", help_text="Short id, e.g. gpt4o."
    )
    new_label = forms.CharField(required=False, max_length=200, label="New condition's label")

    class Meta:
        model = LLMConditionConfig
        fields = [
            "condition", "provider", "model", "temperature", "top_p", "max_tokens", "seed", "n_samples",
            "system_prompt", "prompt_template",
        ]  # fmt: skip
        field_classes = {"provider": ProviderChoiceField, "model": ModelNameField}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "condition" in self.fields:
            field = self.fields["condition"]
            field.required = False
            field.queryset = Condition.objects.filter(kind=Condition.Kind.LLM).select_related("study")
            if not self.instance.pk:
                field.queryset = field.queryset.filter(llm_config__isnull=True)
                field.help_text = "An LLM condition without a configuration; or add a new one below."
        if self.instance.pk:
            for name in ("new_study", "new_name", "new_label"):
                self.fields.pop(name)
        provider_id = (
            self.data.get(self.add_prefix("provider")) if self.is_bound else self.instance.provider_id
        )
        provider = (
            Provider.objects.filter(pk=provider_id).first() if str(provider_id or "").isdigit() else None
        )
        if "model" in self.fields:
            model_field_for_provider(
                self.fields["model"], provider, provider_field=self.add_prefix("provider")
            )

    def clean(self):
        cleaned = super().clean()
        if self.instance.pk:
            return cleaned
        condition, study, name = cleaned.get("condition"), cleaned.get("new_study"), cleaned.get("new_name")
        if condition and (study or name):
            self.add_error("new_study", "Pick an existing condition or add a new one, not both.")
        elif not condition and not (study and name):
            self.add_error(
                "condition",
                "Pick the LLM condition to configure, or give a study and a name to add a new one.",
            )
        elif study and is_frozen(study):
            self.add_error("new_study", frozen_message(study, f"Adding the condition '{name}'"))
        elif study and study.conditions.filter(name=name).exists():
            self.add_error("new_name", f"Study {study.slug} already has a condition named {name}.")
        return cleaned

    def _get_validation_exclusions(self):
        excluded = super()._get_validation_exclusions()
        if not self.instance.pk and self.cleaned_data.get("new_study"):
            excluded.add("condition")  # created with the configuration (services.conditions)
        return excluded
