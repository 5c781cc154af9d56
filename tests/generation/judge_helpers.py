"""Building judges for tests: a study with human and LLM responses, and a judge on a loopback provider."""

from generation.judge_models import Judge
from studies.models import Response


def make_judge(study, provider, *, name="judge", **overrides) -> Judge:
    options = dict(study=study, name=name, provider=provider, model="judge-test", max_tokens=8, seed=5)
    options.update(overrides)
    judge = Judge(**options)
    judge.full_clean()
    judge.save()
    return judge


def judge_reply_body(text, *, prompt_tokens=300, completion_tokens=2, rid="chatcmpl-judge"):
    return {
        "id": rid,
        "object": "chat.completion",
        "created": 1700000000,
        "model": "judge-test-0613",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def study_responses(study):
    return list(Response.objects.filter(condition__study=study).order_by("id"))


def judged_study(httpserver, *, n_prompts: int, **provider_options):
    """A study of `n_prompts` human responses (no LLM condition) and its judge on a loopback provider built with
    `provider_options`: (study, judge)."""
    from .conftest import make_provider, make_study

    provider = make_provider(httpserver, **provider_options)
    study = make_study(provider=provider, n_prompts=n_prompts, conditions=())
    return study, make_judge(study, provider)
