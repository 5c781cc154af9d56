"""EmotionBench LLM subjects: each LLM condition answers the study's instrument by default and after situations.

For each LLM condition of a questionnaire study: `llm_default_runs` default runs and `llm_evoked_runs`
(its QuestionnaireSettings) evoked runs per selected situation (StudySituation; all situations when none is selected). One run slot is
(condition, phase, situation, run_index), stored as a QuestionnaireRun whose unique constraint makes a slot
exactly-once: a slot that exists is skipped, and two workers racing on one slot store it once.

Per query the item order is shuffled (seeded by study seed, condition, phase, situation and run index), the model
sees the items numbered 1..n in that order, and its answers are mapped back to the instrument's item numbers.
Replies are parsed by `questionnaire_replies.reply_parse` (one in-range number per item, in any reasonable
layout; ambiguity rejected); an unparseable reply is re-asked in the same conversation up to `max_asks` times. Every exchange, parsed or not,
is stored as a QuestionnaireExchange with the exact request, the reply and its cost. Provider calls go through
generation.providers (rate limits across workers, classified errors) and are made outside any transaction.
"""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Sum
from django.utils import timezone

from generation.models import LLMConditionConfig
from generation.providers import PermanentProviderError, ProviderError, provider_api_key, provider_complete
from generation.questionnaire_models import QuestionnaireExchange
from generation.questionnaire_replies import ReplyParseError, reply_parse
from generation.services.dispatch import tasks_dispatch
from generation.services.prompts import config_params
from generation.services.running import RunOutcome, retry_decision, run_until_settled
from studies.kinds import NoQuestionnaire, questionnaire_with_instrument
from studies.models import (
    Condition,
    Instrument,
    QuestionnaireAnswer,
    QuestionnaireRun,
    Situation,
    Study,
)
from studies.services import study_closed_problem

SITUATION_PREAMBLE = 'Imagine you are the protagonist in the scenario: "{text}"'
DEFAULT_MAX_ASKS = 3
QUESTIONNAIRE_SLOT_TASK = "generation.tasks.questionnaire_slot_task"  # registered by generation/tasks.py


class QuestionnaireGenerationError(Exception):
    """Generation cannot start; the message says what to fix. Nothing was written."""


# --- Prompts ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    phase: str
    situation: Situation | None
    run_index: int

    @property
    def subject_key(self) -> str:
        return "default" if self.situation is None else self.situation.code


def item_order_for(*, study: Study, condition: Condition, slot: Slot, item_numbers: list[int]) -> list[int]:
    """The seeded shuffle of one query: the same slot always gets the same order."""
    situation = slot.situation.pk if slot.situation else 0
    rng = random.Random(f"{study.seed}:{condition.name}:{slot.phase}:{situation}:{slot.run_index}")
    order = list(item_numbers)
    rng.shuffle(order)
    return order


def questionnaire_prompt(*, instrument: Instrument, situation: Situation | None, items: list[str]) -> str:
    """The instrument's LLM prompt with SCENARIO replaced, then the items numbered in the order shown."""
    scenario = SITUATION_PREAMBLE.format(text=situation.text) if situation else ""
    template = instrument.llm_prompt or (
        f"You can only reply the numbers from {instrument.scale_min} to {instrument.scale_max}. SCENARIO "
        "Please score all of the following one by one:"
    )
    prompt = " ".join(template.replace("SCENARIO", scenario).split())
    listed = "\n".join(f"{position}. {text}" for position, text in enumerate(items, start=1))
    return f"{prompt}\n{listed}"


def _reask_message(instrument: Instrument, n: int, problem: str) -> str:
    return (
        f"I could not read your answer ({problem}). Please reply with exactly one number from "
        f"{instrument.scale_min} to {instrument.scale_max} for each of the {n} items, one per line, "
        'as "item number. score".'
    )


# --- Running ----------------------------------------------------------------------------------------------


@dataclass
class GenerationSummary:
    planned: int = 0
    already_done: int = 0
    stored: int = 0
    failed: list[str] = field(default_factory=list)
    exchanges: int = 0
    reasks: int = 0
    cost: Decimal = Decimal(0)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **deltas) -> None:
        """Add to counters (thread-safe: worker threads share one summary)."""
        with self._lock:
            for name, value in deltas.items():
                setattr(self, name, getattr(self, name) + value)

    def lines(self) -> list[str]:
        return [
            f"{self.planned} run slots: {self.already_done} already done, {self.stored} stored now, "
            f"{len(self.failed)} failed",
            f"{self.exchanges} exchanges ({self.reasks} re-asks), cost {self.cost:.6f}",
            *[f"  failed: {message}" for message in self.failed],
        ]


def questionnaire_conditions(*, study: Study, condition_name: str | None = None) -> list[Condition]:
    """The LLM conditions to run, each with its configuration and provider loaded (`condition.llm_config`);
    refuses what cannot run, naming it."""
    if closed := study_closed_problem(study=study):
        raise QuestionnaireGenerationError(closed)
    try:
        questionnaire_with_instrument(study)
    except NoQuestionnaire as exc:
        raise QuestionnaireGenerationError(str(exc)) from None
    conditions = list(
        study.conditions.filter(kind=Condition.Kind.LLM)
        .select_related("llm_config__provider")
        .order_by("position", "name")
    )
    if condition_name is not None:
        conditions = [c for c in conditions if c.name == condition_name]
        if not conditions:
            raise QuestionnaireGenerationError(
                f"study {study.slug!r} has no LLM condition {condition_name!r}"
            )
    missing = [c.name for c in conditions if getattr(c, "llm_config", None) is None]
    if missing:
        raise QuestionnaireGenerationError(
            f"LLM conditions without a model configuration: {', '.join(missing)}"
        )
    for condition in conditions:
        try:
            provider_api_key(condition.llm_config.provider)
        except PermanentProviderError as exc:
            raise QuestionnaireGenerationError(f"{condition.name}: {exc.message}") from None
    return conditions


def questionnaire_slots(*, study: Study) -> list[Slot]:
    """Every run slot of one condition: the default runs, then the evoked runs of each selected situation."""
    situations = list(
        Situation.objects.filter(study_situations__study=study).order_by("emotion", "factor_index", "index")
    )
    if not situations:
        situations = list(Situation.objects.order_by("emotion", "factor_index", "index"))
    own = questionnaire_with_instrument(study)
    slots = [Slot(QuestionnaireRun.Phase.DEFAULT, None, i) for i in range(own.llm_default_runs)]
    for situation in situations:
        slots += [Slot(QuestionnaireRun.Phase.EVOKED, situation, i) for i in range(own.llm_evoked_runs)]
    return slots


def questionnaire_generate(
    *,
    study: Study,
    condition_name: str | None = None,
    max_asks: int = DEFAULT_MAX_ASKS,
    backoff_base: float = 1.0,
    threads: int = 1,
    on_progress=None,
) -> GenerationSummary:
    """Run every missing slot of the study's LLM conditions (idempotent: existing runs are skipped).

    Guarantees: at most one run per slot (the database's unique constraint); every exchange stored; a slot whose
    replies never parse within `max_asks`, or whose provider fails permanently or past the provider's
    max_attempts, is reported as failed and left empty, so a later call retries it.
    """
    items = _instrument_items(study)
    summary = GenerationSummary()
    work = questionnaire_missing(study=study, condition_name=condition_name, summary=summary)

    def run_one(condition, config, slot) -> None:
        try:
            outcome = questionnaire_slot_run(
                study=study,
                condition=condition,
                config=config,
                slot=slot,
                items=items,
                max_asks=max_asks,
                backoff_base=backoff_base,
                summary=summary,
            )
            if outcome:
                with summary._lock:
                    summary.failed.append(
                        f"{condition.name} {slot.phase} {slot.subject_key} #{slot.run_index}: {outcome}"
                    )
            if on_progress:
                on_progress(summary)
        finally:
            if threads > 1:
                connection.close()  # this worker thread's own connection

    if threads <= 1:
        for args in work:
            run_one(*args)
    else:
        # Provider calls wait on the network, so threads overlap them; the provider's limits are enforced across
        # threads and processes by generation.providers, and a slot is stored once whatever the interleaving.
        with ThreadPoolExecutor(max_workers=threads) as pool:
            for future in [pool.submit(run_one, *args) for args in work]:
                future.result()
    return summary


def _instrument_items(study: Study) -> dict[int, str]:
    return {i.number: i.text for i in study.questionnaire_settings.instrument.items.all()}


def questionnaire_missing(
    *, study: Study, condition_name: str | None = None, summary: GenerationSummary | None = None
) -> list[tuple[Condition, LLMConditionConfig, Slot]]:
    """The run slots of the study's LLM conditions that have no stored run yet (raises
    QuestionnaireGenerationError, naming it, for a condition that cannot run)."""
    conditions = questionnaire_conditions(study=study, condition_name=condition_name)
    slots = questionnaire_slots(study=study)
    summary = summary or GenerationSummary()
    work = []
    for condition in conditions:
        config = condition.llm_config
        done = set(
            QuestionnaireRun.objects.filter(condition=condition).values_list(
                "subject_key", "phase", "run_index"
            )
        )
        for slot in slots:
            summary.planned += 1
            if (slot.subject_key, slot.phase, slot.run_index) in done:
                summary.already_done += 1
            else:
                work.append((condition, config, slot))
    return work


def questionnaire_dispatch(
    *, study: Study, condition_name: str | None = None, max_asks: int = DEFAULT_MAX_ASKS
) -> int:
    """Hands every missing run slot to the generation workers (Celery, on GENERATION_QUEUE), one task per
    slot; returns how many were sent. Without a broker (`make run`) the slots run on background threads
    of this process instead, so a request that starts them returns at once. Safe to call again: stored
    slots are skipped, and a slot sent twice is stored once."""
    work = questionnaire_missing(study=study, condition_name=condition_name)
    messages = [
        (condition.pk, slot.phase, slot.situation.pk if slot.situation else None, slot.run_index, max_asks)
        for condition, _config, slot in work
    ]
    tasks_dispatch(
        task_name=QUESTIONNAIRE_SLOT_TASK, run_here=questionnaire_slot_task_run, arg_lists=messages
    )
    return len(messages)


def questionnaire_slot_task_run(
    condition_id: int, phase: str, situation_id: int | None, run_index: int, max_asks: int
) -> str:
    """One slot by ids (what a worker receives): "" when stored or already there, else why it failed."""
    try:
        condition = Condition.objects.select_related(
            "study__questionnaire_settings__instrument", "llm_config__provider"
        ).get(pk=condition_id)
        study = condition.study
        situation = Situation.objects.get(pk=situation_id) if situation_id is not None else None
        slot = Slot(phase, situation, run_index)
        if QuestionnaireRun.objects.filter(
            condition=condition, subject_key=slot.subject_key, phase=phase, run_index=run_index
        ).exists():
            return ""
        return questionnaire_slot_run(
            study=study,
            condition=condition,
            config=condition.llm_config,
            slot=slot,
            items=_instrument_items(study),
            max_asks=max_asks,
            backoff_base=settings.GENERATION_BACKOFF_BASE,
            summary=GenerationSummary(),
        )
    finally:
        if threading.current_thread() is not threading.main_thread():
            connection.close()  # a background thread's own connection (`make run`)


def questionnaire_slot_run(
    *,
    study: Study,
    condition: Condition,
    config: LLMConditionConfig,
    slot: Slot,
    items: dict[int, str],
    max_asks: int,
    backoff_base: float,
    summary: GenerationSummary,
) -> str:
    """Ask for one slot until a reply parses; store the run. Returns "" on success, else why it failed.

    Each exchange is one step of the shared retry loop (services.running.run_until_settled): a provider error is
    settled by the shared policy (`retry_decision`, counting provider failures against the provider's
    max_attempts, backoff from `backoff_base`, Retry-After honoured); an unparseable reply is re-asked at once
    in the same conversation, up to `max_asks` asks."""
    asker = _SlotAsker(study, condition, config, slot, items, max_asks, backoff_base, summary)
    outcome = run_until_settled(asker.exchange)
    return "" if outcome.status == "done" else outcome.message


class _SlotAsker:
    """One slot's conversation: each `exchange` asks once, records the exchange and says how it settled."""

    def __init__(self, study, condition, config, slot, items, max_asks, backoff_base, summary):
        self.study, self.condition, self.config, self.slot = study, condition, config, slot
        self.max_asks, self.backoff_base, self.summary = max_asks, backoff_base, summary
        self.instrument = study.questionnaire_settings.instrument
        self.order = item_order_for(study=study, condition=condition, slot=slot, item_numbers=sorted(items))
        self.labels = [items[number] for number in self.order]
        prompt = questionnaire_prompt(instrument=self.instrument, situation=slot.situation, items=self.labels)
        self.messages = [{"role": "user", "content": prompt}]
        self.params = config_params(config)
        self.attempt = self.asks = self.failures = 0

    def exchange(self) -> RunOutcome:
        self.attempt += 1
        base = dict(
            condition=self.condition,
            phase=self.slot.phase,
            situation=self.slot.situation,
            run_index=self.slot.run_index,
            attempt=self.attempt,
            item_order=self.order,
        )
        try:
            completion = provider_complete(
                provider=self.config.provider,
                model=self.config.model,
                system=self.instrument.llm_system_prompt,
                messages=self.messages,
                params=self.params,
            )
        except ProviderError as exc:
            return self._provider_failed(exc, base)
        self.summary.add(exchanges=1, cost=completion.cost)
        self.asks += 1
        fields = dict(
            **base, request=completion.request, reply_text=completion.text, **completion.record_fields()
        )
        try:
            values = reply_parse(
                text=completion.text,
                labels=self.labels,
                scale_min=self.instrument.scale_min,
                scale_max=self.instrument.scale_max,
            )
        except ReplyParseError as problem:
            return self._unparseable(completion.text, problem, fields)
        _run_store(
            study=self.study,
            condition=self.condition,
            slot=self.slot,
            order=self.order,
            values=values,
            exchange_fields=fields,
        )
        self.summary.add(stored=1)
        return RunOutcome("done")

    def _provider_failed(self, exc: ProviderError, base: dict) -> RunOutcome:
        self.summary.add(exchanges=1)
        QuestionnaireExchange.objects.create(
            **base,
            request={"messages": self.messages, "params": self.params},
            outcome=QuestionnaireExchange.Outcome.PROVIDER_ERROR,
            error=str(exc),
        )
        self.failures += 1
        decided = retry_decision(
            error=exc,
            attempt=self.failures,
            max_attempts=self.config.provider.max_attempts,
            base=self.backoff_base,
        )
        return RunOutcome(decided.status, decided.countdown, f"provider error: {decided.message}")

    def _unparseable(self, text: str, problem: ReplyParseError, fields: dict) -> RunOutcome:
        QuestionnaireExchange.objects.create(
            **fields, outcome=QuestionnaireExchange.Outcome.UNPARSEABLE, error=str(problem)
        )
        if self.asks >= self.max_asks:
            return RunOutcome(
                "failed", message=f"no parseable reply after {self.asks} asks (last: {problem})"
            )
        self.summary.add(reasks=1)
        self.messages = [
            *self.messages,
            {"role": "assistant", "content": text},
            {"role": "user", "content": _reask_message(self.instrument, len(self.labels), str(problem))},
        ]
        return RunOutcome("retry", countdown=0.0, message="re-ask")


def _run_store(*, study, condition, slot, order, values, exchange_fields) -> None:
    """Write the run, its answers and the parsed exchange in one transaction; a slot another worker stored first
    is left as it is (its unique constraint refuses the second run) and this exchange is kept unlinked."""
    try:
        with transaction.atomic():
            run = QuestionnaireRun.objects.create(
                study=study,
                condition=condition,
                subject_key=slot.subject_key,
                phase=slot.phase,
                situation=slot.situation,
                run_index=slot.run_index,
                item_order=order,
                source=QuestionnaireRun.Source.LLM,
                completed_at=timezone.now(),
            )
            QuestionnaireAnswer.objects.bulk_create(
                [
                    QuestionnaireAnswer(run=run, item_number=number, value=value, position=position)
                    for position, (number, value) in enumerate(zip(order, values, strict=True), start=1)
                ]
            )
            QuestionnaireExchange.objects.create(
                **exchange_fields, run=run, outcome=QuestionnaireExchange.Outcome.PARSED
            )
    except IntegrityError:
        QuestionnaireExchange.objects.create(
            **exchange_fields,
            outcome=QuestionnaireExchange.Outcome.PARSED,
            error="slot already stored by another worker",
        )


def questionnaire_progress(*, study: Study) -> list[dict]:
    """Per LLM condition: slots planned, runs stored, exchanges, re-asks and cost so far."""
    planned = len(questionnaire_slots(study=study))
    rows = []
    for condition in study.conditions.filter(kind=Condition.Kind.LLM).order_by("position", "name"):
        exchanges = QuestionnaireExchange.objects.filter(condition=condition).aggregate(
            n=Count("id"), cost=Sum("cost")
        )
        rows.append(
            {
                "condition": condition.name,
                "planned": planned,
                "stored": QuestionnaireRun.objects.filter(condition=condition).count(),
                "exchanges": exchanges["n"],
                "unparseable": QuestionnaireExchange.objects.filter(
                    condition=condition, outcome=QuestionnaireExchange.Outcome.UNPARSEABLE
                ).count(),
                "cost": exchanges["cost"] or Decimal(0),
            }
        )
    return rows
