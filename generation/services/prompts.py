"""What a condition sends and whether it can: rendering a prompt, the set-up checks, quality flags, examples and
estimates. Sends nothing and dispatches nothing."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError

from generation.models import LLMConditionConfig, system_prompt_validate, template_validate
from generation.providers import (
    PermanentProviderError,
    cost_compute,
    provider_api_key,
    provider_request_build,
    tokens_estimate,
)
from generation.providers.base import TRUNCATED_REASONS
from generation.selectors import words_count
from studies.models import Condition, Prompt, Response, Study
from studies.services import study_closed_problem


class GenerationSetupError(Exception):
    """Generation cannot start; the message names the condition and what to fix. Nothing was written."""


# --- prompts ------------------------------------------------------------------------------------------------


def prompt_fields(prompt: Prompt) -> dict[str, str]:
    return {
        "situation": prompt.situation,
        "speaker_utterance": prompt.speaker_utterance,
        "emotion": prompt.emotion.name,
    }


def config_render(*, config: LLMConditionConfig, prompt: Prompt) -> tuple[str, list[dict]]:
    """The system prompt and messages a condition sends for a prompt (both filled with the prompt's fields; a
    placeholder a prompt does not have is a ValidationError, never sent unfilled)."""
    template_validate(config.prompt_template)
    system_prompt_validate(config.system_prompt)
    fields = prompt_fields(prompt)
    user = config.prompt_template.format_map(fields)
    return config.system_prompt.format_map(fields), [{"role": "user", "content": user}]


def config_params(config: LLMConditionConfig) -> dict:
    return {
        "temperature": config.temperature,
        "top_p": config.top_p,
        "max_tokens": config.max_tokens,
        "seed": config.seed,
    }


# --- quality gates ------------------------------------------------------------------------------------------

_REVEALING = re.compile(
    r"\bas an? (?:ai|a\.i\.|artificial intelligence|language model|large language model|llm|chatbot|assistant)\b"
    r"|\bi(?:'|’)?m (?:just )?(?:an? )?(?:ai|a\.i\.|language model|large language model|chatbot|virtual assistant)\b"
    r"|\bi am (?:just )?(?:an? )?(?:ai|a\.i\.|language model|large language model|chatbot|virtual assistant)\b"
    r"|\b(?:i(?:'|’)?m|i am|this is) (?:claude|chatgpt|gpt-?\d\w*|gemini|bard|llama|mistral|mixtral|copilot)\b"
    r"|\b(?:created|made|trained|developed) by (?:openai|anthropic|google|meta|mistral)\b"
    r"|\bi (?:don(?:'|’)?t|do not) have (?:personal )?(?:feelings|emotions|experiences)\b",
    re.IGNORECASE,
)


REVEALS_MODEL = "reveals_model"


def response_quality_flags(*, text: str, finish_reason: str = "") -> list[str]:
    """Reasons a response needs a human look: empty, truncated (stopped at max tokens), reveals_model."""
    flags = []
    if words_count(text) == 0:
        flags.append("empty")
    if finish_reason in TRUNCATED_REASONS:
        flags.append("truncated")
    if _REVEALING.search(text or ""):
        flags.append(REVEALS_MODEL)
    return flags


# --- selecting conditions and checking the set-up -----------------------------------------------------------


def generation_conditions(*, study: Study, condition_name: str | None = None) -> list[Condition]:
    """The study's LLM conditions (or the one named); GenerationSetupError naming the choices otherwise."""
    conditions = list(study.conditions.filter(kind=Condition.Kind.LLM).order_by("position", "name"))
    if condition_name:
        chosen = [c for c in conditions if c.name == condition_name]
        if not chosen:
            names = ", ".join(c.name for c in conditions) or "none"
            raise GenerationSetupError(
                f"Study {study.slug} has no LLM condition named {condition_name!r} (its LLM conditions: {names})."
            )
        return chosen
    if not conditions:
        raise GenerationSetupError(f"Study {study.slug} has no LLM condition to generate.")
    return conditions


def generation_problems(*, conditions: list[Condition]) -> list[str]:
    """Everything that stops these conditions from being generated, one sentence each, naming the condition."""
    closed = study_closed_problem(study=conditions[0].study) if conditions else None
    problems = [closed] if closed else []
    for condition in conditions:
        config = LLMConditionConfig.objects.select_related("provider").filter(condition=condition).first()
        if config is None:
            problems.append(f"Condition {condition.name}: no LLM configuration (add one in the admin).")
            continue
        try:
            template_validate(config.prompt_template)
        except ValidationError as exc:
            problems.append(f"Condition {condition.name}: prompt template: {' '.join(exc.messages)}")
        try:
            system_prompt_validate(config.system_prompt)
        except ValidationError as exc:
            problems.append(f"Condition {condition.name}: {' '.join(exc.messages)}")
        try:
            provider_api_key(config.provider)
        except PermanentProviderError as exc:
            problems.append(f"Condition {condition.name}: {exc.message}.")
    if conditions and not Prompt.objects.filter(study=conditions[0].study).exists():
        problems.append(f"Study {conditions[0].study.slug} has no prompts yet.")
    return problems


# --- estimates and examples ---------------------------------------------------------------------------------


def config_request(*, config: LLMConditionConfig, prompt: Prompt) -> dict:
    """The exact request body a condition sends for a prompt (as its provider's adapter builds it)."""
    system, messages = config_render(config=config, prompt=prompt)
    return provider_request_build(
        provider=config.provider,
        model=config.model,
        system=system,
        messages=messages,
        params=config_params(config),
    )


def generation_example(*, config: LLMConditionConfig, prompt: Prompt | None = None) -> dict:
    """What would be sent for one prompt (the study's first, unless given): the exact request body."""
    prompt = prompt or Prompt.objects.filter(study=config.condition.study).select_related("emotion").first()
    if prompt is None:
        return {"prompt": None, "system": config.system_prompt, "user": "", "request": None}
    system, messages = config_render(config=config, prompt=prompt)
    request = config_request(config=config, prompt=prompt)
    return {"prompt": prompt, "system": system, "user": messages[0]["content"], "request": request}


def generation_estimate(*, conditions: list[Condition]) -> list[dict]:
    """Per condition, for the slots not yet generated: calls, tokens and an upper-bound cost (every reply at
    max_tokens), and the minutes the provider's request limit allows. Sends nothing."""
    rows = []
    for condition in conditions:
        config = LLMConditionConfig.objects.select_related("provider").filter(condition=condition).first()
        if config is None:
            continue
        done = set(
            Response.objects.filter(condition=condition).values_list("prompt_id", "sample_index").iterator()
        )
        prompts = list(Prompt.objects.filter(study=condition.study).select_related("emotion"))
        calls = 0
        tokens_in = 0
        for prompt in prompts:
            system, messages = config_render(config=config, prompt=prompt)
            per_call_in = tokens_estimate(system=system, messages=messages, max_tokens=0)
            for sample in range(config.n_samples):
                if (prompt.id, sample) not in done:
                    calls += 1
                    tokens_in += per_call_in
        tokens_out = calls * config.max_tokens
        provider = config.provider
        rows.append(
            {
                "condition": condition.name,
                "provider": provider.name,
                "model": config.model,
                "calls": calls,
                "input_tokens": tokens_in,
                "output_tokens_max": tokens_out,
                "cost_max": cost_compute(provider=provider, usage_in=tokens_in, usage_out=tokens_out),
                "minutes_at_rate_limit": round(calls / provider.requests_per_minute, 1),
            }
        )
    return rows
