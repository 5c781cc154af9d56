"""Generation's part of the frozen design: each LLM configuration, described, guarded and copied."""

import pytest
from django.db import transaction

from generation.design import FROZEN_CONFIG_FIELDS
from generation.models import LLMConditionConfig, Provider
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


# One new value per frozen field of an LLM configuration (each differs from make_study's).
CONFIG_EDITS = {
    "model": "gpt-other",
    "temperature": 0.1,
    "top_p": 0.5,
    "max_tokens": 77,
    "seed": 12345,
    "n_samples": 3,
    "system_prompt": "Be brief.",
    "prompt_template": "Reply to: {speaker_utterance}",
}


def test_every_frozen_configuration_field_has_an_edit_here():
    assert set(CONFIG_EDITS) | {"provider_id"} == set(FROZEN_CONFIG_FIELDS)


@pytest.mark.parametrize("field", [*sorted(CONFIG_EDITS), "provider_id"])
def test_a_configuration_field_edit_changes_the_hash_and_is_refused_after_launch(field, openai_provider):
    study = make_study(provider=openai_provider)
    config = LLMConditionConfig.objects.get(condition__study=study)
    value = (
        Provider.objects.create(name="other", api_key_env="OTHER_KEY").pk
        if field == "provider_id"
        else CONFIG_EDITS[field]
    )
    before = design_sha256(design_build(study))
    original = getattr(config, field)
    setattr(config, field, value)
    config.save()  # a draft: free, and the hash follows
    assert design_sha256(design_build(study)) != before
    setattr(config, field, original)
    config.save()
    frozen = design_freeze(study, reason="launch").sha256
    config.save()  # a no-op save keeps the design
    setattr(config, field, value)
    with pytest.raises(FrozenDesignError, match="LLM configuration"):
        config.save()
    with pytest.raises(FrozenDesignError, match="Deleting the LLM configuration"), transaction.atomic():
        LLMConditionConfig.objects.get(pk=config.pk).delete()
    assert design_sha256(design_build(study)) == frozen


def test_a_provider_named_by_a_frozen_design_keeps_its_name_kind_and_base_url(openai_provider, admin_client):
    study = make_study(provider=openai_provider)
    openai_provider.base_url = "http://127.0.0.1:1/v1"
    openai_provider.save()  # a draft's provider: free to edit
    design_freeze(study, reason="launch")
    frozen = design_current(study).sha256
    openai_provider.requests_per_minute = 7
    openai_provider.save()  # limits and prices are not part of the design
    for field, value in {"name": "renamed", "kind": "anthropic", "base_url": "http://127.0.0.1:2/v1"}.items():
        provider = Provider.objects.get(pk=openai_provider.pk)
        setattr(provider, field, value)
        with pytest.raises(FrozenDesignError, match=f"provider '.*' \\({field}\\)"), transaction.atomic():
            provider.save()
    stored = Provider.objects.get(pk=openai_provider.pk)
    assert (stored.name, stored.kind, stored.base_url, stored.requests_per_minute) == (
        openai_provider.name,
        "openai",
        "http://127.0.0.1:1/v1",
        7,
    )
    assert design_current(study).sha256 == frozen

    # The admin says why on the page instead of failing.
    url = f"/admin/generation/provider/{stored.pk}/change/"
    page = admin_client.get(url)
    assert page.status_code == 200
    form = page.context["adminform"].form
    data = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    data["base_url"] = "http://127.0.0.1:3/v1"
    response = admin_client.post(url, data)
    assert response.status_code == 400
    assert "part of its frozen design" in response.content.decode()
    assert "Add a new provider for other studies instead." in response.content.decode()
    assert Provider.objects.get(pk=stored.pk).base_url == "http://127.0.0.1:1/v1"
