"""Corpus and published-ratings import on PostgreSQL, with a row-by-row baseline measured in the same run.

    .venv/bin/python bench/imports.py

Prints ONE JSON object. A scratch database is created on the PostgreSQL of BENCH_POSTGRES_URL (default
postgres://postgres@127.0.0.1:5432/postgres), migrated, used and dropped. Figures, in seconds:

- parse: reading and checking the public dataset (2,000 prompts × 3 conditions), no database writes;
- import_corpus: `corpus_import` of the whole file (validate, then bulk writes in one transaction);
- import_ratings: `ratings_import` of the same file (+ 600 participants, 6,000 assignments and ratings);
- baseline_row_by_row: the same prompts and responses written with one INSERT per row (ORM .create()),
  in one transaction, i.e. what the import would cost without bulk writes.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.scratch_db import database_drop, database_fresh  # noqa: E402

DATASET = Path(
    os.environ.get(
        "BENCH_DATASET", ROOT.parent / "shared/data/llm-empathy-evaluation/dataset_and_ratings.csv"
    )
)
SERVER = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    if not DATASET.exists():
        print(json.dumps({"skipped": f"no dataset at {DATASET}"}))
        return
    name = f"empathy_bench_imports_{uuid.uuid4().hex[:8]}"
    database_fresh(name, server=SERVER)
    try:
        os.environ["DATABASE_URL"] = SERVER.rsplit("/", 1)[0] + "/" + name
        os.environ.setdefault("DJANGO_ENV", "test")
        os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection, transaction

        log("migrating the scratch database")
        call_command("migrate", verbosity=0)
        from kinds.rating.importer import ratings_import
        from studies.importers import corpus_import, corpus_parse
        from studies.models import Condition, Emotion, Prompt, Response, Study

        data = DATASET.read_bytes()
        timings = {}

        started = time.perf_counter()
        corpus = corpus_parse(data=data, known_emotions={e.name for e in Emotion.objects.all()})
        timings["parse"] = time.perf_counter() - started

        log("import_corpus")
        started = time.perf_counter()
        result = corpus_import(study_slug="bench-corpus", data=data)
        timings["import_corpus"] = time.perf_counter() - started

        log("import_ratings")
        started = time.perf_counter()
        ratings = ratings_import(study_slug="bench-ratings", data=data)
        timings["import_ratings"] = time.perf_counter() - started

        log("baseline: one INSERT per row")
        emotions = {e.name: e for e in Emotion.objects.all()}
        started = time.perf_counter()
        with transaction.atomic():
            study = Study.objects.create(slug="bench-baseline", title="baseline")
            conditions = {
                n: Condition.objects.create(study=study, name=n, position=i)
                for i, n in enumerate(corpus.conditions)
            }
            for parsed in corpus.prompts:
                prompt = Prompt.objects.create(
                    study=study,
                    dialogue_id=parsed.dialogue_id,
                    emotion=emotions[parsed.emotion],
                    situation=parsed.situation,
                    speaker_utterance=parsed.speaker_utterance,
                )
                for n, text in parsed.responses.items():
                    Response.objects.create(prompt=prompt, condition=conditions[n], text=text)
        timings["baseline_row_by_row"] = time.perf_counter() - started
        connection.close()
        print(
            json.dumps(
                {
                    "benchmark": "imports",
                    "database": "postgresql",
                    "prompts": result.prompts,
                    "responses": result.responses,
                    "ratings": ratings.ratings,
                    "participants": sum(ratings.participants_per_condition.values()),
                    "seconds": {k: round(v, 3) for k, v in timings.items()},
                    "speedup_over_row_by_row": round(
                        timings["baseline_row_by_row"] / timings["import_corpus"], 1
                    ),
                }
            )
        )
    finally:
        database_drop(name, server=SERVER)


if __name__ == "__main__":
    main()
