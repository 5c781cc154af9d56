"""An LLM condition added and configured in one step: the condition (kind LLM) and its configuration (provider,
model, decoding, templates) are written together or not at all."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max

from generation.models import LLMConditionConfig
from studies.models import Condition, Study


def llm_condition_save(
    *, config: LLMConditionConfig, study: Study | None = None, name: str = "", label: str = ""
) -> LLMConditionConfig:
    """Save an LLM condition's configuration. With a `study` and a `name`, first add the condition (kind LLM, last
    in the study's order) in the same transaction. A study whose design is frozen (launched) refuses the new
    condition (studies.design's guard raises FrozenDesignError) and nothing is written."""
    with transaction.atomic():
        if study is not None:
            last = study.conditions.aggregate(last=Max("position"))["last"]
            config.condition = Condition.objects.create(
                study=study,
                name=name,
                label=label,
                kind=Condition.Kind.LLM,
                position=0 if last is None else last + 1,
            )
        config.save()
    return config
