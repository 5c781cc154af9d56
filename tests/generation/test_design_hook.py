"""Generation's part of the frozen design: each LLM configuration, described, guarded and copied."""

import pytest

from generation.models import LLMConditionConfig
from studies.design import (
    FrozenDesignError,
    design_build,
    design_current,
    design_freeze,
    design_sha256,
    study_amend,
)

from .conftest import make_study

pytestmark = pytest.mark.django_db


def test_the_llm_configuration_is_in_the_frozen_design_and_refused_after_launch(openai_provider):
    study = make_study(provider=openai_provider)
    llm = next(c for c in design_build(study)["conditions"] if c["name"] == "gpt")["llm"]
    assert (llm["model"], llm["seed"], llm["decoding"]["temperature"]) == ("gpt-test", 11, 0.7)
    assert "{situation}" in llm["prompt_template"] and llm["provider"] == openai_provider.name
    config = LLMConditionConfig.objects.get(condition__study=study)
    config.temperature = 0.2
    config.save()  # a draft: free to edit, and the hash follows
    before = design_sha256(design_build(study))
    config.temperature = 0.3
    config.save()
    assert design_sha256(design_build(study)) != before
    design_freeze(study, reason="launch")
    frozen = design_current(study).sha256
    config.save()  # no-op
    config.model = "gpt-other"
    with pytest.raises(FrozenDesignError, match="LLM configuration"):
        config.save()
    assert design_sha256(design_build(study)) == frozen
    study_amend(study=study, field="seed", value=99, reason="r", author="a")
    assert design_current(study).sha256 != frozen
