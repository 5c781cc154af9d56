"""Generate (or resume, cancel, retry, estimate, export) a study's LLM responses from the terminal.

    python manage.py generate_responses <study-slug> [--condition NAME] [--dry-run]
    python manage.py generate_responses <study-slug> --cancel | --retry-failed | --stats
    python manage.py generate_responses <study-slug> --export-provenance provenance.csv
    python manage.py generate_responses <study-slug> --batch | --batch-poll   (OpenAI's Batch API, half price)

Starting is idempotent: run it again after a crash or a cancel and it resumes where the database says it is.
With a broker (REDIS_URL) the work goes to the Celery workers and this command shows their progress; without one
(or with --in-process) the command does the work itself. Either way the providers' limits hold.
"""

import sys
import threading
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from generation import batches, selectors
from generation.models import GenerationBatch, LLMConditionConfig
from generation.services import dispatch, prompts
from studies.models import Study


class Command(BaseCommand):
    help = "Pre-generate the responses of a study's LLM conditions (cost estimate, progress, cancel, retry)."

    def add_arguments(self, parser):
        parser.add_argument("study", help="The study's slug.")
        parser.add_argument("--condition", help="Only this LLM condition (its name).")
        parser.add_argument(
            "--dry-run", action="store_true", help="Show the cost estimate and an example; send nothing."
        )
        parser.add_argument("--cancel", action="store_true", help="Stop: pending items are cancelled.")
        parser.add_argument("--retry-failed", action="store_true", help="Give failed items fresh attempts.")
        parser.add_argument("--stats", action="store_true", help="Show progress and length statistics only.")
        parser.add_argument(
            "--export-provenance", metavar="FILE", help="Write provenance to FILE (.csv or .jsonl)."
        )
        parser.add_argument(
            "--include-superseded", action="store_true", help="Export: also regenerated-away rows."
        )
        parser.add_argument(
            "--in-process", action="store_true", help="Do the work in this process, not on workers."
        )
        parser.add_argument(
            "--threads", type=int, default=0, help="--in-process: threads (default: providers' max)."
        )
        parser.add_argument(
            "--no-wait", action="store_true", help="Dispatch to the workers and return at once."
        )
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")
        parser.add_argument(
            "--batch",
            action="store_true",
            help="Submit the pending items to OpenAI's Batch API (results within 24 h, half price).",
        )
        parser.add_argument(
            "--batch-poll", action="store_true", help="Collect the study's finished batches now."
        )

    def handle(self, *args, **options):
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f"No study with slug {options['study']!r}.")
        try:
            conditions = prompts.generation_conditions(study=study, condition_name=options["condition"])
        except prompts.GenerationSetupError as exc:
            raise CommandError(str(exc)) from None

        if options["export_provenance"]:
            count = selectors.provenance_export(
                study=study,
                path=options["export_provenance"],
                include_superseded=options["include_superseded"],
            )
            self.stdout.write(f"Wrote {count} provenance rows to {options['export_provenance']}.")
            return
        if options["stats"]:
            self._summary(study)
            return
        if options["cancel"]:
            count = dispatch.generation_cancel(conditions=conditions)
            self.stdout.write(f"Cancelled {count} pending items (calls already in flight still finish).")
            return
        if options["dry_run"]:
            self._dry_run(conditions)
            return
        if options["batch"] or options["batch_poll"]:
            self._batches(study, conditions, submit=options["batch"])
            return

        in_process = options["in_process"] or dispatch.tasks_run_in_process()
        problems = prompts.generation_problems(conditions=conditions)
        if problems:
            raise CommandError("Generation could not start: " + " ".join(problems))
        self._estimate(conditions)
        try:
            if options["retry_failed"]:
                item_ids = dispatch.generation_retry_failed(
                    conditions=conditions, via="command", dispatch=not in_process
                )
                self.stdout.write(f"Retrying {len(item_ids)} failed items.")
            else:
                result = dispatch.generation_start(
                    study=study, conditions=conditions, via="command", dispatch=not in_process
                )
                item_ids = result.item_ids
                self.stdout.write(
                    f"{result.created} new items, {len(item_ids)} to run"
                    + ("" if in_process else " (sent to the workers)")
                    + "."
                )
        except prompts.GenerationSetupError as exc:
            raise CommandError(str(exc)) from None

        runner = None
        if in_process:
            threads = options["threads"] or max(
                (c.llm_config.provider.max_concurrency for c in conditions if hasattr(c, "llm_config")),
                default=4,
            )
            if threads == 1:  # one at a time, in this thread (and this database connection)
                self._run_here(item_ids, progress=not options["no_progress"])
                self._summary(study, conditions=conditions)
                return
            runner = threading.Thread(
                target=dispatch.generation_run_in_process,
                kwargs={"item_ids": item_ids, "threads": threads},
                daemon=True,
            )
            runner.start()
        elif options["no_wait"]:
            return
        else:
            self.stdout.write(
                "Waiting for the workers (celery -A config worker); Ctrl-C leaves them running."
            )
        try:
            self._watch(study, conditions, runner, progress=not options["no_progress"])
        except KeyboardInterrupt:
            self.stdout.write("\nStopped watching. Workers carry on; `--cancel` stops them.")
            return
        self._summary(study, conditions=conditions)

    # --- output ---------------------------------------------------------------------------------------------

    def _run_here(self, item_ids, *, progress: bool):
        from tqdm import tqdm

        with tqdm(total=len(item_ids), unit="item", file=sys.stderr, disable=not progress) as bar:
            dispatch.generation_run_in_process(item_ids=item_ids, threads=1, on_settled=lambda: bar.update(1))

    def _watch(self, study, conditions, runner, *, progress: bool):
        from tqdm import tqdm

        names = {c.name for c in conditions}

        def snapshot():
            rows = [r for r in selectors.generation_progress(study=study) if r["name"] in names]
            settled = sum(r["done"] + r["failed"] + r["cancelled"] for r in rows)
            total = sum(r["slots"] for r in rows)
            spend = sum(r["spend"] for r in rows)
            failed = sum(r["failed"] for r in rows)
            return settled, total, spend, failed

        settled, total, spend, failed = snapshot()
        next_sweep = time.monotonic()
        bar = tqdm(
            total=total,
            initial=settled,
            unit="resp",
            file=sys.stderr,
            disable=not progress,
            dynamic_ncols=True,
        )
        try:
            while True:
                unsettled = selectors.generation_unsettled(conditions=conditions)
                settled, total, spend, failed = snapshot()
                bar.update(settled - bar.n)
                bar.set_postfix(failed=failed, spend=f"${spend:.4f}", refresh=False)
                if runner is not None:
                    if not runner.is_alive():
                        break
                elif unsettled == 0:
                    break
                elif time.monotonic() >= next_sweep:
                    # A worker killed mid-call leaves its items running until their lease expires: hand them on.
                    swept = dispatch.generation_sweep(conditions=conditions)
                    if swept:
                        bar.write(f"Re-dispatched {swept} items whose worker stopped answering.")
                    next_sweep = time.monotonic() + settings.GENERATION_LEASE_SECONDS
                time.sleep(0.5)
        finally:
            bar.close()
        if runner is not None:
            runner.join()

    def _estimate(self, conditions):
        rows = prompts.generation_estimate(conditions=conditions)
        self.stdout.write("Cost estimate (upper bound: every reply at max_tokens):")
        for row in rows:
            self.stdout.write(
                f"  {row['condition']}: {row['calls']} calls to {row['provider']}/{row['model']}, "
                f"~{row['input_tokens']} input + ≤{row['output_tokens_max']} output tokens, "
                f"≤ ${row['cost_max']:.4f}, ≥ {row['minutes_at_rate_limit']} min at the request limit"
            )
        total = sum((row["cost_max"] for row in rows), start=0)
        self.stdout.write(f"  total ≤ ${total:.4f}")

    def _dry_run(self, conditions):
        problems = prompts.generation_problems(conditions=conditions)
        self._estimate([c for c in conditions if LLMConditionConfig.objects.filter(condition=c).exists()])
        for condition in conditions:
            config = LLMConditionConfig.objects.filter(condition=condition).select_related("provider").first()
            if config is None:
                continue
            try:
                example = prompts.generation_example(config=config)
            except Exception as exc:  # a broken template is reported below with the other problems
                self.stdout.write(f"\n[{condition.name}] cannot render an example: {exc}")
                continue
            self.stdout.write(f"\n[{condition.name}] example request ({config.provider.kind}, not sent):")
            if example["system"]:
                self.stdout.write(f"  system: {example['system']}")
            self.stdout.write("  user:\n    " + example["user"].replace("\n", "\n    "))
        self.stdout.write("\nDry run: nothing was sent.")
        if problems:
            raise CommandError("Generation could not start: " + " ".join(problems))

    def _summary(self, study, conditions=None):
        names = {c.name for c in conditions} if conditions else None
        self.stdout.write("\nProgress:")
        for row in selectors.generation_progress(study=study):
            if names and row["name"] not in names:
                continue
            self.stdout.write(
                f"  {row['name']}: {row['done']}/{row['slots']} done, {row['failed']} failed, "
                f"{row['pending'] + row['running']} pending, {row['cancelled']} cancelled, "
                f"{row['flagged']} flagged, spend ${row['spend']:.4f}"
            )
            if row["stopped_reason"]:
                self.stdout.write(f"    {row['stopped_reason']}")
            for message, count in row["errors"]:
                self.stdout.write(f"    failed ×{count}: {message}")
        self.stdout.write("Response length in words (n, mean, median, SD):")
        for row in selectors.response_length_stats(study=study):
            marker = " (baseline)" if row["baseline"] else ""
            self.stdout.write(
                f"  {row['condition']}{marker}: n={row['n']} mean={row['mean']} median={row['median']} sd={row['sd']}"
            )

    def _batches(self, study, conditions, *, submit: bool) -> None:
        if submit:
            try:
                submitted = batches.batch_submit(study=study, conditions=conditions, via="command")
            except prompts.GenerationSetupError as exc:
                raise CommandError(str(exc)) from None
            for batch in submitted:
                self.stdout.write(
                    f"{batch.condition.name}: {batch.items_total} items submitted as batch {batch.provider_batch_id}"
                )
            if not submitted:
                self.stdout.write("No pending items to submit.")
        for batch in GenerationBatch.objects.filter(condition__in=conditions).select_related(
            "condition__llm_config__provider"
        ):
            if not submit:
                batch = batches.batch_poll(batch=batch)
            self.stdout.write(
                f"{batch.condition.name} batch {batch.provider_batch_id or batch.pk}: {batch.status} "
                f"({batch.provider_status or '-'}), {batch.items_total} items, {batch.items_stored} stored, "
                f"{batch.items_failed} failed, {batch.items_returned} given back, cost {batch.cost:.4f}"
                + (f" - {batch.error}" if batch.error else "")
            )
