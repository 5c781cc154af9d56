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
)
from studies.models import Condition

from .models import LLMConditionConfig

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


def register() -> None:
    condition_hook_register("llm", ConditionHook(describe=llm_configs_describe, copy=llm_config_copy))
    pre_save.connect(_guard_config, sender=LLMConditionConfig, dispatch_uid="design_guard_llm_config")
    pre_delete.connect(
        _guard_config_delete, sender=LLMConditionConfig, dispatch_uid="design_guard_llm_delete"
    )
