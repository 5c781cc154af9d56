"""Analysis and export of a large rating study on PostgreSQL; prints ONE JSON object.

    .venv/bin/python bench/analysis.py [--ratings 1000000] [--bootstrap 2000] [--repeat 3] [--keep]
        [--db empathy_bench_analysis]

Standalone: creates its own database, migrates it, generates a study of --ratings ratings inside PostgreSQL
(INSERT ... SELECT over generate_series: 5 conditions, 2,000 prompts over the 32 emotions, participants of 10
ratings each), then measures, in the same run:

* analysis: `study_analyze` end to end (one-query fetch into pandas, exclusions, distributions, every chi-square
  test with Holm, the proportional-odds model with emotion, participant bootstrap overall and by valence,
  agreement), with the fetch alone reported too;
* export: the streamed ratings CSV (`analysis.exports.export_lines`, what the dashboard/API/command serve) written
  to a file, in a fresh child process: wall time, peak RSS of the process and its RSS before the export;
* baseline: PostgreSQL's own `COPY (SELECT <the export's query>) TO STDOUT WITH CSV HEADER` of the same rows and
  columns (without the exclusion flags, labels and formula neutralisation), in another fresh child process;
* dashboard: the analysis computed ahead (as the worker does), the first view with it current, the first view after
  new ratings arrive (the last result at once while a background thread computes the new one) and how long until
  the new result is in (Django's test client, the whole middleware stack).

The database is dropped at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.scratch_db import PG, admin_sql, database_drop, database_fresh  # noqa: E402, F401 (scale.py)

CONDITIONS = [("human", 0.49), ("gpt4", 0.60), ("llama2", 0.55), ("gemini", 0.57), ("mixtral", 0.58)]


def log(message: str) -> None:
    print(f"[bench/analysis] {message}", file=sys.stderr, flush=True)


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    """This process image's peak RSS (VmHWM; unlike ru_maxrss it does not carry over from the parent across exec)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def django_setup(db: str) -> None:
    os.environ["DATABASE_URL"] = f"{PG}/{db}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.pop(
        "REDIS_URL", None
    )  # the cache stays in-process: the bench measures computation, not caching
    import django

    django.setup()


def _insert_select(model, varied: dict[str, str], source_sql: str, params: list) -> int:
    """INSERT INTO <model> (every concrete column) SELECT ...: varied columns get the SQL expressions given (no
    placeholders in them: the constants' parameters come first), the others their model default (auto_now /
    auto_now_add: now()), so new fields with defaults need no change here. `params` belong to `source_sql`."""
    from django.db import connection

    columns, expressions, constants = [], [], []
    template = model()
    for f in model._meta.concrete_fields:
        if f.primary_key:
            continue
        columns.append(f'"{f.column}"')
        if f.name in varied or f.attname in varied:
            expressions.append(varied.get(f.name, varied.get(f.attname)))
        elif getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
            expressions.append("now()")
        else:
            expressions.append("%s")
            constants.append(f.get_db_prep_save(getattr(template, f.attname), connection))
    sql = f'INSERT INTO "{model._meta.db_table}" ({", ".join(columns)}) SELECT {", ".join(expressions)} {source_sql}'
    with connection.cursor() as cur:
        cur.execute(sql, [*constants, *params])
        return cur.rowcount


def generate(n_ratings: int, seed: float = 0.42):
    from django.db import connection, transaction

    from kinds.rating.models import Rating
    from studies.models import Assignment, Condition, Emotion, Participant, Prompt, Response, Study

    n_participants = n_ratings // 10
    with transaction.atomic():
        study = Study.objects.create(slug="bench", title="Bench study", state=Study.State.CLOSED, seed=1)
        conds = [
            Condition.objects.create(study=study, name=name, label=name, position=i, is_baseline=(i == 0))
            for i, (name, _) in enumerate(CONDITIONS)
        ]
        from studies.models import Valence

        names = [
            "afraid", "angry", "annoyed", "anticipating", "anxious", "apprehensive", "ashamed", "caring", "confident",
            "content", "devastated", "disappointed", "disgusted", "embarrassed", "excited", "faithful", "furious",
            "grateful", "guilty", "hopeful", "impressed", "jealous", "joyful", "lonely", "nostalgic", "prepared",
            "proud", "sad", "sentimental", "surprised", "terrified", "trusting",
        ]  # fmt: skip
        positive = {"anticipating", "caring", "confident", "content", "excited", "faithful", "grateful", "hopeful",
                    "impressed", "joyful", "prepared", "proud", "surprised", "trusting"}  # fmt: skip
        emotion_ids = [
            Emotion.objects.get_or_create(
                name=n, defaults={"valence": Valence.POSITIVE if n in positive else Valence.NEGATIVE}
            )[0].id
            for n in names
        ]
        with connection.cursor() as cur:
            cur.execute("SELECT setseed(%s)", [seed])
        _insert_select(
            Prompt,
            {
                "study": str(study.id),
                "dialogue_id": "'bench:' || g",
                "emotion": f"(ARRAY{emotion_ids}::bigint[])[1 + g %% 32]",
                "situation": "'I remember the day when something happened to me, number ' || g || ', and I still think "
                "about it often.'",
                "speaker_utterance": "'You will not believe what happened to me today, it was number ' || g || '!'",
            },
            "FROM generate_series(0, 1999) g",
            [],
        )
        cond_ids = [c.id for c in conds]
        # Rows are inserted in a known order, so their ids are consecutive from a base: assignments and ratings
        # are then computed by arithmetic over generate_series instead of joins (minutes → seconds at 1M).
        _insert_select(
            Response,
            {
                "prompt": "p.id",
                "condition": f"(ARRAY{cond_ids}::bigint[])[1 + c]",
                "text": "'That sounds like a lot to carry. It is understandable to feel this way after what happened, "
                "and I am glad you shared it. How are you holding up now? (' || p.id || ')'",
            },
            "FROM generate_series(0, 4) c CROSS JOIN studies_prompt p WHERE p.study_id = %s ORDER BY c, p.id",
            [study.id],
        )
        _insert_select(
            Participant,
            {
                "study": str(study.id),
                "condition": f"(ARRAY{cond_ids}::bigint[])[1 + g %% 5]",
                "external_id": "'bench-' || g",
                "seed": "g",
                "status": "'completed'",
                "step": "'done'",
                "flagged_for_exclusion": "(g %% 97 = 0)",
            },
            "FROM generate_series(0, %s) g ORDER BY g",
            [n_participants - 1],
        )
        with connection.cursor() as cur:
            cur.execute(
                "SELECT min(r.id), count(*) FROM studies_response r JOIN studies_prompt p ON p.id = r.prompt_id "
                "WHERE p.study_id = %s",
                [study.id],
            )
            base_response, n_responses = cur.fetchone()
            cur.execute(
                "SELECT min(id), max(id) - min(id) + 1 FROM studies_participant WHERE study_id = %s",
                [study.id],
            )
            base_participant, span = cur.fetchone()
        assert n_responses == 10000 and span == n_participants, "ids are not consecutive; cannot generate"
        # participant g (condition g % 5) rates 10 consecutive prompts of its condition, position pos
        _insert_select(
            Assignment,
            {
                "participant": f"{base_participant} + g",
                "position": "pos",
                "kind": "'response'",
                "response": f"{base_response} + (g %% 5) * 2000 + (((g / 5) * 10 + pos) %% 2000)",
            },
            "FROM generate_series(0, %s) g CROSS JOIN generate_series(0, 9) pos ORDER BY g, pos",
            [n_participants - 1],
        )
        with connection.cursor() as cur:
            cur.execute(
                "SELECT min(a.id), count(*) FROM studies_assignment a WHERE a.participant_id >= %s",
                [base_participant],
            )
            base_assignment, n_assignments = cur.fetchone()
        shares = "ARRAY[" + ", ".join(str(share) for _, share in CONDITIONS) + "]"
        _insert_select(
            Rating,
            {
                "assignment": f"{base_assignment} + j",
                "value": f"CASE WHEN random() < ({shares})[1 + (j / 10) %% 5] THEN 3 "
                "WHEN random() < 0.6 THEN 2 ELSE 1 END",
                "response_time_ms": "2000 + floor(random() * 9000)::int",
            },
            "FROM generate_series(0, %s) j",
            [n_assignments - 1],
        )
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    return study


def measure_export(db: str, out: str) -> dict:
    """Child process: the streamed ratings export, as the dashboard/API/command serve it, to a file."""
    django_setup(db)
    from analysis import exports
    from studies.models import Study

    study = Study.objects.get(slug="bench")
    before = rss_mb()
    t0 = time.perf_counter()
    stream = exports.export_lines(study=study, what="ratings")
    with open(out, "w", encoding="utf-8", newline="") as fh:
        for piece in stream:
            fh.write(piece)
    seconds = time.perf_counter() - t0
    return {
        "seconds": round(seconds, 2),
        "rows": stream.rows,
        "bytes": os.path.getsize(out),
        "rss_before_mb": round(before, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


def measure_copy(db: str, out: str) -> dict:
    """Child process: PostgreSQL's COPY of the same SELECT the export runs."""
    django_setup(db)
    from django.db import connection

    from kinds.rating import frame as rating_frame
    from studies.models import Study

    study = Study.objects.get(slug="bench")
    qs = (
        rating_frame.rating_queryset(study=study)
        .order_by("assignment__participant_id", "assignment__position")
        .values_list(*rating_frame.RATING_EXPORT_FIELDS.values())
    )
    sql, params = qs.query.sql_with_params()
    before = rss_mb()
    t0 = time.perf_counter()
    with connection.cursor() as cur:
        select = cur.mogrify(sql, params).decode()
        with open(out, "w", encoding="utf-8") as fh:
            cur.cursor.copy_expert(f"COPY ({select}) TO STDOUT WITH CSV HEADER", fh)
    seconds = time.perf_counter() - t0
    with open(out, "rb") as fh:
        rows = sum(1 for _ in fh) - 1
    return {
        "seconds": round(seconds, 2),
        "lines": rows,
        "bytes": os.path.getsize(out),
        "rss_before_mb": round(before, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


def _new_participant_rates(study, n: int = 10) -> None:
    """New ratings arrive: one more participant of the baseline condition rates n responses."""
    from kinds.rating.models import Rating
    from studies.models import Assignment, Participant

    cond = study.conditions.get(is_baseline=True)
    responses = list(cond.responses.order_by("id")[:n])
    person = Participant.objects.create(
        study=study, condition=cond, external_id=f"late-{time.time_ns()}", status="completed", step="done"
    )
    for position, response in enumerate(responses):
        assignment = Assignment.objects.create(
            participant=person, position=position, kind=Assignment.Kind.RESPONSE, response=response
        )
        Rating.objects.create(assignment=assignment, value=1 + position % 3, response_time_ms=4000)


def measure_dashboard(study) -> dict:
    """The dashboard as an analyst meets it (Django's test client, the whole middleware stack), with the analysis
    computed ahead: what the worker spends computing; the first view with that result current; the first view
    after new ratings arrive (the last result at once, a new compute asked for, here on the local thread as under
    `make run`); and how long until the new result is in."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from analysis import snapshots

    user, _ = get_user_model().objects.get_or_create(
        username="bench-analyst", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    client.get("/analysis/")  # a server that has answered before: URLconf, middleware and templates loaded
    url = f"/analysis/{study.slug}/"
    status_url = f"/analysis/{study.slug}/status.json"

    t0 = time.perf_counter()
    snapshots.snapshot_compute(study_id=study.pk, baseline=None, no_exclusions=False)
    compute_seconds = time.perf_counter() - t0

    t0 = time.perf_counter()
    page = client.get(url)
    first_view = time.perf_counter() - t0
    assert page.status_code == 200 and b"Up to date" in page.content, page.content[:400]

    _new_participant_rates(study)
    t0 = time.perf_counter()
    page = client.get(url)
    after_new = time.perf_counter() - t0
    assert page.status_code == 200 and b"Computing the analysis of the latest data" in page.content
    t0 = time.perf_counter()
    while not client.get(status_url).json()["current"]:
        if time.perf_counter() - t0 > 900:
            raise RuntimeError("the new analysis did not arrive within 15 minutes")
        time.sleep(0.5)
    ready = time.perf_counter() - t0
    t0 = time.perf_counter()
    page = client.get(url)
    updated_view = time.perf_counter() - t0
    assert b"Up to date" in page.content
    return {
        "compute_ahead_seconds": round(compute_seconds, 2),
        "first_view_seconds": round(first_view, 3),
        "first_view_after_new_ratings_seconds": round(after_new, 3),
        "new_result_ready_after_seconds": round(ready, 1),
        "view_of_the_new_result_seconds": round(updated_view, 3),
    }


def child(kind: str, db: str, out: str) -> dict:
    result = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--db", db, "--child-out", out],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{kind} child failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ratings", type=int, default=1_000_000)
    parser.add_argument("--bootstrap", type=int, default=2000)
    parser.add_argument("--db", default="empathy_bench_analysis")
    parser.add_argument(
        "--repeat", type=int, default=3, help="Export/COPY pairs to run (the median is reported)."
    )
    parser.add_argument("--keep", action="store_true", help="Keep the database at the end (for inspection).")
    parser.add_argument("--child", choices=["export", "copy"], help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child == "export":
        print(json.dumps(measure_export(args.db, args.child_out)))
        return
    if args.child == "copy":
        print(json.dumps(measure_copy(args.db, args.child_out)))
        return

    import tempfile

    database_fresh(args.db)
    try:
        django_setup(args.db)
        from django.core.management import call_command

        log("migrating")
        call_command("migrate", verbosity=0)
        log(f"generating {args.ratings:,} ratings")
        t0 = time.perf_counter()
        study = generate(args.ratings)
        generate_seconds = time.perf_counter() - t0

        from analysis.services import AnalysisOptions, study_analyze
        from kinds.rating import frame as rating_frame

        log("fetching the rows")
        t0 = time.perf_counter()
        frame = rating_frame.rating_rows_frame(study=study)
        fetch_seconds = time.perf_counter() - t0
        n_rows = len(frame)
        del frame
        log("analysing")
        t0 = time.perf_counter()
        analysis = study_analyze(study=study, options=AnalysisOptions(bootstrap_samples=args.bootstrap))
        analysis_seconds = time.perf_counter() - t0
        overall = analysis.tests[analysis.tests["scope"] == "overall"]
        log("dashboard (computed ahead, then new ratings)")
        dashboard = measure_dashboard(study)
        from django.db import connections

        connections.close_all()

        # On a shared machine one pair of runs is at the mercy of whoever else is busy: the export and the COPY
        # alternate --repeat times and the pair with the median ratio is reported, with every ratio.
        pairs = []
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.repeat):
                log(f"export (streamed CSV) in a child process, run {i + 1}/{args.repeat}")
                export = child("export", args.db, f"{tmp}/export.csv")
                log(f"COPY baseline in a child process, run {i + 1}/{args.repeat}")
                copy = child("copy", args.db, f"{tmp}/copy.csv")
                pairs.append((export["seconds"] / max(copy["seconds"], 1e-9), export, copy))
        pairs.sort(key=lambda pair: pair[0])
        _, export, copy = pairs[len(pairs) // 2]

        print(
            json.dumps(
                {
                    "benchmark": "analysis",
                    "ratings": n_rows,
                    "participants": int(analysis.exclusions.iloc[0]["participants"]),
                    "generate_seconds": round(generate_seconds, 1),
                    "analysis": {
                        "seconds": round(analysis_seconds, 2),
                        "fetch_seconds": round(fetch_seconds, 2),
                        "bootstrap_samples": args.bootstrap,
                        "ordinal_model": analysis.ordinal.formula if analysis.ordinal else None,
                        "ordinal_converged": analysis.ordinal.converged if analysis.ordinal else None,
                        "tests": int(len(analysis.tests)),
                        "omnibus_chi2": round(float(overall.iloc[0]["chi2"]), 2),
                        "peak_rss_mb": round(peak_rss_mb(), 1),
                    },
                    "dashboard": dashboard,
                    "export_csv": export,
                    "baseline_postgres_copy": copy,
                    "export_vs_copy_time_ratio": round(export["seconds"] / max(copy["seconds"], 1e-9), 2),
                    "export_vs_copy_time_ratios_all_runs": [round(r, 2) for r, _, _ in pairs],
                }
            )
        )
    finally:
        if not args.keep:
            database_drop(args.db)


if __name__ == "__main__":
    main()
