"""Run a study's LLM judge over its responses (all, or the conditions named), from the terminal.

    python manage.py judge_run <study-slug> <judge-name> [--conditions A B] [--wait]
    python manage.py judge_run <study-slug> <judge-name> --batch [--wait]      (the provider's Batch API)
    python manage.py judge_run <study-slug> <judge-name> --retry-failed | --status

Idempotent: each (response, sample) is rated once; running again resumes what is pending and leaves what is done.
With a broker (REDIS_URL) the ratings go to the Celery workers (--wait follows them); without one, or with
--in-process, this command rates them itself on the provider's concurrency. Progress, counts, spend and the most
common errors are printed at the end. Create or change a judge with `judge_configure` or in the admin.
"""

import sys
import threading
import time

from django.core.management.base import BaseCommand, CommandError

from generation import judge_batches, selectors
from generation.judge_models import Judge, JudgeBatch
from generation.services import dispatch, judging
from studies.models import Study


class Command(BaseCommand):
    help = "Rate a study's responses with one of its LLM judges (progress, counts, spend)."

    def add_arguments(self, parser):
        parser.add_argument("study", help="The study's slug.")
        parser.add_argument("judge", help="The judge's name within the study.")
        parser.add_argument(
            "--conditions", nargs="+", metavar="NAME", help="Only these conditions' responses."
        )
        parser.add_argument(
            "--batch", action="store_true", help="Submit the pending ratings as one Batch API batch."
        )
        parser.add_argument(
            "--wait",
            action="store_true",
            help="Wait until every rating has settled (or the batch has ended).",
        )
        parser.add_argument("--retry-failed", action="store_true", help="Give failed ratings fresh attempts.")
        parser.add_argument("--status", action="store_true", help="Only print the judge's progress.")
        parser.add_argument("--in-process", action="store_true", help="Rate in this process, not on workers.")
        parser.add_argument(
            "--threads", type=int, default=0, help="--in-process: threads (default: provider's)."
        )
        parser.add_argument(
            "--poll-seconds", type=float, default=30.0, help="--batch --wait: seconds between polls."
        )
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(self, *args, **options):
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f"No study with slug {options['study']!r}.")
        judge = (
            Judge.objects.select_related("provider", "study")
            .filter(study=study, name=options["judge"])
            .first()
        )
        if judge is None:
            names = (
                ", ".join(j.name for j in selectors.judges_of(study=study))
                or "none (judge_configure adds one)"
            )
            raise CommandError(
                f"Study {study.slug} has no judge named {options['judge']!r} (its judges: {names})."
            )
        try:
            conditions = (
                judging.judge_conditions(judge=judge, names=options["conditions"])
                if options["conditions"]
                else None
            )
            if options["status"]:
                self._summary(judge, conditions)
            elif options["batch"]:
                self._batch(judge, conditions, wait=options["wait"], every=options["poll_seconds"])
            else:
                self._run(judge, conditions, options)
        except judging.JudgeSetupError as exc:
            raise CommandError(str(exc)) from None

    def _estimate(self, judge, conditions):
        e = judging.judge_estimate(judge=judge, conditions=conditions)
        batch = (
            f"; ≤ ${e['batch_cost_max']:.4f} through the Batch API" if e["batch_cost_max"] is not None else ""
        )
        self.stdout.write(
            f"Estimate: {e['calls']} calls, ~{e['input_tokens']} input + ≤{e['output_tokens_max']} output tokens, "
            f"≤ ${e['cost_max']:.4f}{batch}; ≥ {e['minutes_at_rate_limit']} min at the request limit."
        )

    def _run(self, judge, conditions, options):
        in_process = options["in_process"] or dispatch.tasks_run_in_process()
        if not options["retry_failed"]:
            self._estimate(judge, conditions)
        if options["retry_failed"]:
            ids = judging.judge_retry_failed(judge=judge, conditions=conditions, dispatch=not in_process)
            self.stdout.write(f"Retrying {len(ids)} failed ratings.")
        else:
            started = judging.judge_start(judge=judge, conditions=conditions, dispatch=not in_process)
            ids = started.rating_ids
            self.stdout.write(
                f"{started.created} new ratings, {len(ids)} to run"
                + ("" if in_process else " (sent to the workers)")
                + f" by {judge.provider.name}/{judge.model}."
            )
        if in_process:
            threads = options["threads"] or judge.provider.max_concurrency
            if threads <= 1:  # one at a time, in this thread (and this database connection)
                dispatch.generation_run_in_process(
                    item_ids=ids, threads=1, runner=judging.judge_rating_run_until_settled
                )
                self._summary(judge, conditions)
                return
            runner = threading.Thread(
                target=dispatch.generation_run_in_process,
                kwargs={
                    "item_ids": ids,
                    "threads": threads,
                    "runner": judging.judge_rating_run_until_settled,
                },
                daemon=True,
            )
            runner.start()
            self._watch(judge, conditions, alive=runner.is_alive, progress=not options["no_progress"])
            runner.join()
        elif options["wait"]:
            self.stdout.write(
                "Waiting for the workers (celery -A config worker); Ctrl-C leaves them running."
            )
            self._watch(judge, conditions, alive=None, progress=not options["no_progress"])
        self._summary(judge, conditions)

    def _batch(self, judge, conditions, *, wait: bool, every: float):
        self._estimate(judge, conditions)
        batch = judge_batches.judge_batch_submit(judge=judge, conditions=conditions, started_by="command")
        if batch is None:
            self.stdout.write("No pending ratings to submit.")
        else:
            self.stdout.write(f"{batch.ratings_total} ratings submitted as batch {batch.provider_batch_id}.")
        while True:
            open_batches = list(JudgeBatch.objects.filter(judge=judge, status=JudgeBatch.Status.SUBMITTED))
            for one in open_batches:
                one = judge_batches.judge_batch_poll(batch=one)
                self.stdout.write(
                    f"batch {one.provider_batch_id}: {one.get_status_display()} ({one.provider_status or '-'}), "
                    f"{one.ratings_total} ratings, {one.ratings_stored} stored, {one.ratings_failed} failed, "
                    f"{one.ratings_returned} given back, cost ${one.cost:.4f}"
                    + (f" - {one.error}" if one.error else "")
                )
            if (
                not wait
                or not JudgeBatch.objects.filter(judge=judge, status=JudgeBatch.Status.SUBMITTED).exists()
            ):
                break
            time.sleep(every)
        self._summary(judge, conditions)

    def _watch(self, judge, conditions, *, alive, progress: bool):
        from tqdm import tqdm

        snapshot = selectors.judge_progress(judge=judge, conditions=conditions)
        settled = lambda s: s["done"] + s["failed"]  # noqa: E731
        bar = tqdm(
            total=snapshot["slots"],
            initial=settled(snapshot),
            unit="rating",
            file=sys.stderr,
            disable=not progress,
        )
        try:
            while True:
                snapshot = selectors.judge_progress(judge=judge, conditions=conditions)
                bar.update(settled(snapshot) - bar.n)
                bar.set_postfix(failed=snapshot["failed"], spend=f"${snapshot['spend']:.4f}", refresh=False)
                if alive is not None and not alive():
                    break
                if alive is None and snapshot["pending"] + snapshot["running"] == 0:
                    break
                time.sleep(0.5)
        except KeyboardInterrupt:
            self.stdout.write("\nStopped watching; the workers carry on.")
        finally:
            bar.close()

    def _summary(self, judge, conditions):
        s = selectors.judge_progress(judge=judge, conditions=conditions)
        self.stdout.write(
            f"Judge {judge.name} ({judge.provider.name}/{judge.model}): {s['done']}/{s['slots']} rated, "
            f"{s['pending'] + s['running']} pending, {s['failed']} failed, {s['not_started']} not started; "
            f"spend ${s['spend']:.4f} ({s['tokens_in']} input + {s['tokens_out']} output tokens)"
        )
        for row in s["conditions"]:
            self.stdout.write(
                f"  {row['name']}: {row['done']} done, {row['pending'] + row['running']} pending, {row['failed']} failed"
            )
        for message, count in s["errors"]:
            self.stdout.write(f"  failed ×{count}: {message}")
