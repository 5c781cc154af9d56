"""Starting, cancelling, retrying and sweeping generation, and handing work to the workers.

Work goes to the Celery workers by task name (GENERATE_ITEM below; generation/tasks.py registers it under that
name), so this module needs nothing from tasks.py and tasks.py may use everything here: the tasks sit on top of
the services, never beside them. Without a broker (`make run`, task_always_eager) the same work runs on
background threads of this process through the one retry loop (services.running.item_run_until_settled).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from config.celery import app
from generation.models import GenerationItem, GenerationJob
from generation.services.prompts import GenerationSetupError, generation_problems
from generation.services.running import item_run_until_settled, items_stop, lease_cutoff
from studies.models import Condition, Prompt, Response, Study

Status = GenerationItem.Status
GENERATE_ITEM = "generation.tasks.generate_item"

# --- handing work over --------------------------------------------------------------------------------------

_local_executor: ThreadPoolExecutor | None = None
_local_lock = threading.Lock()


def tasks_run_in_process() -> bool:
    return bool(app.conf.task_always_eager)


def local_executor() -> ThreadPoolExecutor:
    """The background threads that run generation in the web process when there is no broker."""
    global _local_executor
    with _local_lock:
        if _local_executor is None:
            _local_executor = ThreadPoolExecutor(
                max_workers=settings.GENERATION_LOCAL_THREADS, thread_name_prefix="generation"
            )
    return _local_executor


def tasks_dispatch(*, task_name: str, run_here: Callable, arg_lists: list[tuple]) -> None:
    """Send the task registered as `task_name` once per argument tuple to the generation workers (Celery, on
    GENERATION_QUEUE, one broker connection for the lot). Without a broker (`make run`), call `run_here(*args)`
    on background threads of this process instead, so a request that starts the work returns at once."""
    if not arg_lists:
        return
    if tasks_run_in_process():
        executor = local_executor()
        for args in arg_lists:
            executor.submit(run_here, *args)
        return
    with app.producer_or_acquire() as producer:
        for args in arg_lists:
            app.send_task(task_name, args, queue=settings.GENERATION_QUEUE, producer=producer)


def generation_dispatch(*, item_ids: list[int]) -> None:
    """Hand items to the workers, or to background threads without a broker (see `tasks_dispatch`). The pending
    ones are stamped (`updated_at`) as sent now: the sweep sends a never-attempted item again only once its last
    message is older than GENERATION_REDISPATCH_SECONDS (`_lost_messages`)."""
    if not item_ids:
        return
    GenerationItem.objects.filter(id__in=item_ids, status=Status.PENDING, attempts=0).update(
        updated_at=timezone.now()
    )
    tasks_dispatch(
        task_name=GENERATE_ITEM,
        run_here=item_run_until_settled,
        arg_lists=[(item_id,) for item_id in item_ids],
    )


def generation_run_in_process(
    *, item_ids: list[int], threads: int, on_settled=None, runner: Callable = item_run_until_settled
) -> None:
    """Run items in this process and return when each has settled (done, failed, skipped). threads <= 1: one
    after the other in the calling thread; otherwise on a pool of threads. The provider limits still hold.
    `runner(id, own_thread=...)` runs one through the retry loop (a judge's ratings pass their own)."""
    if threads <= 1:
        for item_id in item_ids:
            runner(item_id, own_thread=False)
            if on_settled:
                on_settled()
        return
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="generation") as pool:
        futures = [pool.submit(runner, item_id) for item_id in item_ids]
        for future in futures:
            future.result()
            if on_settled:
                on_settled()


# --- start, cancel, retry, sweep ----------------------------------------------------------------------------


@dataclass
class StartResult:
    jobs: list[GenerationJob] = field(default_factory=list)
    created: int = 0
    already_done: int = 0
    dispatched: int = 0
    item_ids: list[int] = field(default_factory=list)


def _dispatchable(conditions) -> list[int]:
    """Items a worker should be asked to run: pending ones, and running ones whose lease expired (their
    worker died). Ordered prompt by prompt across conditions, so every provider gets work from the start."""
    rows = (
        GenerationItem.objects.filter(condition__in=conditions)
        .filter(Q(status=Status.PENDING) | Q(status=Status.RUNNING, claimed_at__lt=lease_cutoff()))
        .order_by("prompt_id", "sample_index", "condition_id")
        .values_list("id", flat=True)
    )
    return list(rows)


def generation_start(
    *,
    study: Study,
    conditions: list[Condition],
    started_by: str = "",
    via: str = "command",
    dispatch: bool = True,
) -> StartResult:
    """Create the missing items of these conditions and dispatch every item not yet done (after commit).

    Idempotent: starting again resumes — existing items are reused, done ones are left alone, cancelled ones
    become pending again, items whose worker died are re-dispatched. Raises GenerationSetupError (writing
    nothing) when a condition cannot be generated: no configuration, a bad template, the key variable unset."""
    problems = generation_problems(conditions=conditions)
    if problems:
        raise GenerationSetupError(" ".join(problems))
    result = StartResult()
    with transaction.atomic():  # all items of all conditions, or none
        for condition in conditions:
            config = condition.llm_config
            job = GenerationJob.objects.create(condition=condition, started_by=started_by, via=via)
            result.jobs.append(job)
            existing = set(
                GenerationItem.objects.filter(condition=condition).values_list("prompt_id", "sample_index")
            )
            responses = dict(
                (
                    ((p, s), r)
                    for p, s, r in Response.objects.filter(condition=condition).values_list(
                        "prompt_id", "sample_index", "id"
                    )
                )
            )
            new_items = []
            for prompt_id in Prompt.objects.filter(study=study).values_list("id", flat=True):
                for sample in range(config.n_samples):
                    if (prompt_id, sample) in existing:
                        continue
                    response_id = responses.get((prompt_id, sample))
                    new_items.append(
                        GenerationItem(
                            condition=condition,
                            prompt_id=prompt_id,
                            sample_index=sample,
                            job=job,
                            status=Status.DONE if response_id else Status.PENDING,
                            response_id=response_id,
                        )
                    )
                    result.already_done += bool(response_id)
            GenerationItem.objects.bulk_create(new_items, ignore_conflicts=True, batch_size=1000)
            result.created += len(new_items)
            GenerationItem.objects.filter(condition=condition, status=Status.CANCELLED).update(
                status=Status.PENDING, job=job, updated_at=timezone.now()
            )
            GenerationItem.objects.filter(condition=condition, status=Status.PENDING).update(job=job)
        item_ids = _dispatchable(conditions)
        result.item_ids = item_ids
        if dispatch:
            result.dispatched = len(item_ids)
            transaction.on_commit(lambda: generation_dispatch(item_ids=item_ids))
    return result


def generation_cancel(*, conditions: list[Condition]) -> int:
    """Stop sending: every pending item becomes cancelled (calls already in flight finish and are stored).
    Returns how many items were cancelled; generation_start resumes them."""
    return items_stop(condition_ids=[c.id for c in conditions], job_status=GenerationJob.Status.CANCELLED)


def generation_retry_failed(
    *, conditions: list[Condition], started_by: str = "", via: str = "command", dispatch: bool = True
) -> list[int]:
    """Give every failed item a fresh set of attempts and dispatch it (unless dispatch=False: the caller runs
    them). Raises GenerationSetupError first if the set-up is still broken (e.g. the key variable is still
    unset). Returns the retried items' ids."""
    problems = generation_problems(conditions=conditions)
    if problems:
        raise GenerationSetupError(" ".join(problems))
    with transaction.atomic():
        ids = list(
            GenerationItem.objects.filter(condition__in=conditions, status=Status.FAILED).values_list(
                "id", flat=True
            )
        )
        GenerationItem.objects.filter(id__in=ids, status=Status.FAILED).update(
            status=Status.PENDING,
            attempts=0,
            last_error="",
            error_kind="",
            next_attempt_at=None,
            updated_at=timezone.now(),
        )
        for condition in conditions:
            GenerationJob.objects.create(condition=condition, started_by=started_by, via=via)
        if dispatch:
            transaction.on_commit(lambda: generation_dispatch(item_ids=ids))
    return ids


def _lost_messages() -> Q:
    """Pending items never attempted whose last message went out more than GENERATION_REDISPATCH_SECONDS ago
    (`generation_dispatch` stamps it): a worker killed after taking the message off the queue but before
    starting it took it along. Items a provider's Batch API holds are running under their batch, never
    pending, and an item that ever carried a batch is left to the batch's own bookkeeping."""
    sent_before = timezone.now() - timedelta(seconds=settings.GENERATION_REDISPATCH_SECONDS)
    return Q(
        status=Status.PENDING,
        attempts=0,
        next_attempt_at__isnull=True,
        batch__isnull=True,
        updated_at__lt=sent_before,
    )


def generation_sweep(*, conditions: list[Condition] | None = None) -> int:
    """Re-dispatch items whose worker died mid-call (lease expired), pending items whose retry message was lost
    (due long ago), and never-attempted items whose message was lost (`_lost_messages`). Safe to run any time:
    claiming decides who works, so a late duplicate message (the broker returning the lost one after its
    visibility timeout) is skipped. Returns how many were dispatched."""
    grace = lease_cutoff()
    items = GenerationItem.objects.filter(
        Q(status=Status.RUNNING, claimed_at__lt=grace)
        | Q(status=Status.PENDING, next_attempt_at__lt=grace)
        | _lost_messages()
    )
    if conditions is not None:
        items = items.filter(condition__in=conditions)
    ids = list(items.values_list("id", flat=True))
    generation_dispatch(item_ids=ids)
    return len(ids)
