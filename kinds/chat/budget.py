"""The chat study's spending limits: its design's budget (`ChatSettings.budget_usd`) and token cap a participant
(`token_cap_per_participant`), held by generation's respond-now budget (generation/budget.py: each call's maximum
reserved under the study's row lock before it is sent, settled with its reported cost after).

* `chat_budget_sync(study)`: the design's limits are the study's StudyBudget (written when they differ, e.g. at
  the first enrolment after launch; the design is frozen then, so once).
* At enrolment (kind.py `assignments_create`, under the enrolment's lock of the study row): a study whose budget
  cannot cover one more call of the newcomer's source refuses them (`StudyBudgetSpent`: the study's "full" page).
* In a conversation (kinds/chat/turns.py): a reply the budget cannot cover is answered by the design's fallback
  and the conversation ends there; a participant at their token cap, or a fallback the budget cannot cover
  either, gets a polite close of the conversation (no model asked) and goes on to the rating.
"""

from __future__ import annotations

from decimal import Decimal

from generation.budget import StudyBudget, budget_admits, budget_configure, call_maximum
from generation.models import LLMConditionConfig
from studies.models import Condition, Participant, Study

from .turns import chat_settings


def chat_budget_sync(study: Study) -> None:
    """The study's StudyBudget holds its design's limits (one read when it already does)."""
    settings = chat_settings(study)
    wanted = (settings.budget_usd, settings.token_cap_per_participant)
    held = StudyBudget.objects.filter(study_id=study.pk).values_list("cap", "participant_token_cap").first()
    if held is None and wanted == (None, None):
        return
    if held is None or tuple(held) != wanted:
        budget_configure(study_id=study.pk, cap=wanted[0], participant_token_cap=wanted[1])


def chat_enrolment_admits(participant: Participant) -> bool:
    """Whether the budget can take the newcomer: more left than one opening call of their source costs at most
    (a person source: the fallback's, which answers when the person is late)."""
    study = participant.study
    chat_budget_sync(study)
    return budget_admits(study.pk, need=_opening_call_maximum(participant.condition, study))


def _opening_call_maximum(condition: Condition, study: Study) -> Decimal:
    if condition.kind != Condition.Kind.LLM:
        condition = chat_settings(study).fallback_condition
    config = (
        LLMConditionConfig.objects.select_related("provider").filter(condition=condition).first()
        if condition is not None
        else None
    )
    if config is None:
        return Decimal(0)
    maximum = call_maximum(
        provider=config.provider, system=config.system_prompt, messages=[], max_tokens=config.max_tokens
    )
    return maximum.cost
