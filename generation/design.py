"""What generation adds to a study's frozen design (studies/design.py): each LLM condition's configuration
(provider, model, templates, decoding settings, seed), how a copy or a wave copies it, and the guard that
refuses an edit of a frozen study's configuration. Registered in GenerationConfig.ready."""

from __future__ import annotations

from django.db.models.signals import pre_delete, pre_save

from studies.design import (
    ConditionHook,
    changed_fields,
    condition_hook_register,
    deleted_with_study,
    design_edit_refuse,
    frozen_message,
    is_frozen,
)
from studies.models import Condition, Study

from .models import GenerationItem, LLMConditionConfig, Provider
from .selectors import placeholder_conditions

# The configuration's fields that decide what the model is asked and how it decodes.
FROZEN_CONFIG_FIELDS = (
    "provider_id", "model", "temperature", "top_p", "max_tokens", "seed", "n_samples", "system_prompt",
    "prompt_template",
)  # fmt: skip


def llm_configs_describe(conditions: list[Condition]) -> dict[int, dict]:
    """Condition id -> its LLM configuration, JSON-ready (conditions without one are left out)."""
    configs = LLMConditionConfig.objects.filter(condition__in=conditions).select_related("provider")
    return {
        config.condition_id: {
            "provider": config.provider.name,
            "provider_kind": config.provider.kind,
            "base_url": config.provider.base_url,
            "model": config.model,
            "system_prompt": config.system_prompt,
            "prompt_template": config.prompt_template,
            "decoding": {
                "temperature": config.temperature,
                "top_p": config.top_p,
                "max_tokens": config.max_tokens,
                "n_samples": config.n_samples,
            },
            "seed": config.seed,
        }
        for config in configs
    }


def llm_config_copy(source: Condition, target: Condition) -> None:
    """Gives `target` the same LLM configuration as `source` (nothing when `source` has none)."""
    config = LLMConditionConfig.objects.filter(condition=source).first()
    if config is None:
        return
    config.pk = None
    config.id = None
    config.condition = target
    config.save()


def _guard_config(sender, instance: LLMConditionConfig, raw=False, **kwargs):
    if not raw and changed_fields(instance, FROZEN_CONFIG_FIELDS):
        condition = Condition.objects.select_related("study").get(pk=instance.condition_id)
        design_edit_refuse(condition.study, f"The LLM configuration of condition '{condition.name}'")


def _guard_config_delete(sender, instance: LLMConditionConfig, origin=None, **kwargs):
    """Removing a launched condition's configuration would drop it from the frozen design (its condition's own
    deletion is refused by studies' guard; with the whole study it goes)."""
    if (
        deleted_with_study(origin)
        or isinstance(origin, Condition)
        or getattr(origin, "model", None) is Condition
    ):
        return
    condition = Condition.objects.select_related("study").get(pk=instance.condition_id)
    design_edit_refuse(condition.study, f"Deleting the LLM configuration of condition '{condition.name}'")


# The provider's fields a frozen design records for each LLM condition it serves.
FROZEN_PROVIDER_FIELDS = ("name", "kind", "base_url")


def provider_edit_problems(provider: Provider, changed: list[str]) -> list[str]:
    """Why changing the `changed` fields of a stored `provider` is refused: one message per launched study whose
    frozen design names the provider's name, kind or base URL (limits, prices and the key variable stay editable:
    they decide how fast and at what price, not what is asked of which model)."""
    changed = [f for f in changed if f in FROZEN_PROVIDER_FIELDS]
    if provider.pk is None or not changed:
        return []
    studies = (
        Study.objects.filter(conditions__llm_config__provider_id=provider.pk).distinct().order_by("slug")
    )
    what = f"The provider '{provider.name}' ({', '.join(changed)}) of its LLM conditions"
    return [
        frozen_message(study, what) + " Add a new provider for other studies instead."
        for study in studies
        if is_frozen(study)
    ]


def _guard_provider(sender, instance: Provider, raw=False, **kwargs):
    if raw or instance.pk is None:
        return
    changed = changed_fields(instance, FROZEN_PROVIDER_FIELDS)
    if not changed:
        return
    for study in Study.objects.filter(conditions__llm_config__provider_id=instance.pk).distinct():
        design_edit_refuse(
            study, f"The provider '{instance.name}' ({', '.join(changed)}) of its LLM conditions"
        )


def studies_generating(study_ids: list[int]) -> set[int]:
    """The studies (of `study_ids`) with generation items pending or running."""
    return set(
        GenerationItem.objects.filter(
            condition__study_id__in=study_ids,
            status__in=[GenerationItem.Status.PENDING, GenerationItem.Status.RUNNING],
        )
        .values_list("condition__study_id", flat=True)
        .distinct()
    )


def placeholders_of(study: Study) -> list[str]:
    """The study's conditions answered by the test model (placeholder replies): a dry run's."""
    return placeholder_conditions(study=study)


def register() -> None:
    condition_hook_register(
        "llm",
        ConditionHook(
            describe=llm_configs_describe,
            copy=llm_config_copy,
            busy=studies_generating,
            placeholders=placeholders_of,
        ),
    )
    pre_save.connect(_guard_config, sender=LLMConditionConfig, dispatch_uid="design_guard_llm_config")
    pre_delete.connect(
        _guard_config_delete, sender=LLMConditionConfig, dispatch_uid="design_guard_llm_delete"
    )
    pre_save.connect(_guard_provider, sender=Provider, dispatch_uid="design_guard_provider")
