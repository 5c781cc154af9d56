"""Import and analysis of EmotionBench's published results on PostgreSQL; prints ONE JSON object.

    .venv/bin/python bench/emotionbench.py [--data /path/to/emotionbench-data] [--keep] [--db empathy_bench_eb]

Standalone: creates its own database, migrates it, imports the instruments and situations, then measures in the
same run:

* import: `published_results_import` end to end (7 LLM answer files + crowd.xlsx → ~15,000 runs, ~300,000
  answers), with the parse-and-validate phase alone reported too;
* answers insert: the same answer rows written by `answers_insert` (one INSERT ... SELECT unnest(arrays) per
  50,000 rows) and, as the baseline, by Django's `bulk_create` (batches of 5,000);
* analysis: scores (one fetch of every answer into pandas) and `emotionbench_analyse` (every condition × overall,
  emotion, factor and situation × category: the paper's tests and the paired tests).

The database is dropped at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.scratch_db import PG, database_drop, database_fresh  # noqa: E402


def log(message: str) -> None:
    print(f"[bench/emotionbench] {message}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--data",
        default=os.environ.get(
            "EMOTIONBENCH_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "data" / "emotionbench")
        ),
    )
    parser.add_argument("--db", default="empathy_bench_eb")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    data = Path(args.data)
    if not (data / "questionnaires.json").exists():
        sys.exit(f"no EmotionBench data at {data} (give --data)")

    database_fresh(args.db)
    os.environ["DATABASE_URL"] = f"{PG}/{args.db}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    from kinds.questionnaire.analysis import emotionbench_analyse, questionnaire_scores
    from kinds.questionnaire.results import answers_insert, published_results_import
    from kinds.questionnaire.results_parse import crowd_results_parse_xlsx, llm_results_parse_csv
    from studies.emotionbench.instruments import instruments_import, situations_import
    from studies.models import Instrument, QuestionnaireAnswer

    try:
        log("migrating")
        call_command("migrate", verbosity=0)
        instruments_import(path=data / "questionnaires.json")
        situations_import(path=data / "situations.json")
        panas = Instrument.objects.get(name="PANAS")
        folder = data / "results" / "PANAS Test"

        log("parsing")
        started = time.perf_counter()
        texts: dict = {}
        for path in sorted(folder.glob("*-PANAS-testing.csv")):
            llm_results_parse_csv(path=path, instrument=panas, texts=texts)
        crowd_results_parse_xlsx(path=folder / "crowd.xlsx", instrument=panas)
        parse_s = time.perf_counter() - started

        log("importing")
        started = time.perf_counter()
        summary = published_results_import(study_slug="eb", folder=data)
        import_s = time.perf_counter() - started

        rows = list(QuestionnaireAnswer.objects.values_list("run_id", "item_number", "value", "position"))
        timings = {}
        for name, write in (
            ("answers_insert_unnest_s", lambda: answers_insert(rows=rows)),
            (
                "baseline_bulk_create_s",
                lambda: QuestionnaireAnswer.objects.bulk_create(
                    [
                        QuestionnaireAnswer(run_id=r, item_number=i, value=v, position=p)
                        for r, i, v, p in rows
                    ],
                    batch_size=5000,
                ),
            ),
        ):
            with transaction.atomic():
                QuestionnaireAnswer.objects.all().delete()
            started = time.perf_counter()
            with transaction.atomic():
                write()
            timings[name] = round(time.perf_counter() - started, 2)
            log(f"{name}: {timings[name]} s")

        from studies.models import Study

        study = Study.objects.get(slug="eb")
        started = time.perf_counter()
        scores = questionnaire_scores(study=study)
        scores_s = time.perf_counter() - started
        started = time.perf_counter()
        analysis = emotionbench_analyse(study=study, scores=scores)
        analyse_s = time.perf_counter() - started
        with open("/proc/loadavg") as fh:
            load = fh.read().split()[0]
        print(
            json.dumps(
                {
                    "bench": "emotionbench",
                    "runs": sum(summary.conditions.values()),
                    "answers": len(rows),
                    "parse_and_validate_s": round(parse_s, 2),
                    "import_total_s": round(import_s, 2),
                    **timings,
                    "analysis_scores_s": round(scores_s, 2),
                    "analysis_tests_s": round(analyse_s, 2),
                    "tests_computed": 2 * len(analysis.results),
                    "load_average_1min": float(load),
                    "database": connection.vendor,
                }
            )
        )
    finally:
        if not args.keep:
            database_drop(args.db)


if __name__ == "__main__":
    main()
