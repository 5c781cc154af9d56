"""The cost of enrollment (count, choose the condition and the items, insert) for a full-size rating study.

    .venv/bin/python bench/enrollment.py [--prompts 2000] [--conditions 3] [--participants 600] [--threads 8]

PostgreSQL: DATABASE_URL when set, else this machine's server (BENCH_POSTGRES_URL, default
postgres://postgres@127.0.0.1:5432) with the name empathy_bench.

Builds a throw-away PostgreSQL database (test_<name>, dropped at the end) with one live study of `--prompts`
prompts × `--conditions` conditions (10 items per participant), then measures:

* sequential: `participant_enroll` latency percentiles while `--participants` arrive one after another
  (the counts it runs grow with the study);
* concurrent: enrollments/s with `--threads` arriving at once (they serialise on the study's row lock);
* baseline, in the same run and database: the bare writes of an enrollment — one Participant INSERT and a
  bulk INSERT of its 10 assignments, under the same study row lock — so `overhead_ratio` says what the
  counting and the balanced choice add on top of the writes that cannot be avoided.

Prints ONE JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault(
    "DATABASE_URL",
    os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432") + "/empathy_bench",
)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DJANGO_ENV", "test")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.db import connection, connections, transaction  # noqa: E402

from kinds.rating.models import RatingSettings  # noqa: E402
from studies.models import Assignment, Condition, Emotion, Participant, Prompt, Response, Study  # noqa: E402
from studies.participants import participant_enroll  # noqa: E402


def percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

    return {"n": len(ordered), "p50_ms": at(0.5), "p95_ms": at(0.95), "p99_ms": at(0.99), "max_ms": at(1.0)}


def build_study(prompts: int, conditions: int) -> Study:
    study = Study.objects.create(
        slug="bench-enrollment",
        title="Enrollment benchmark",
        state=Study.State.LIVE,
        items_per_participant=10,
        quota_per_condition=1_000_000,
        completion_code="BENCH",
    )
    RatingSettings.objects.create(study=study, target_ratings_per_response=3)
    emotion, _ = Emotion.objects.get_or_create(name="joyful")
    arms = [Condition.objects.create(study=study, name=f"arm{i}", position=i) for i in range(conditions)]
    rows = Prompt.objects.bulk_create(
        Prompt(study=study, dialogue_id=f"d{i}", emotion=emotion, situation="s", speaker_utterance="u")
        for i in range(prompts)
    )
    Response.objects.bulk_create(Response(prompt=p, condition=c, text="r") for p in rows for c in arms)
    return study


def baseline_enroll(study: Study, external_id: str, responses: list[int]) -> None:
    # In a study of its own, so the baseline's participants do not weigh on the measured study's balance.
    with transaction.atomic():
        Study.objects.select_for_update().get(pk=study.pk)
        participant = Participant.objects.create(study=study, external_id=external_id, condition_id=study.arm)
        Assignment.objects.bulk_create(
            Assignment(participant=participant, position=i, response_id=r) for i, r in enumerate(responses)
        )


def timed(fn, n: int) -> list[float]:
    samples = []
    for i in range(n):
        start = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - start)
    return samples


def concurrent(fn, n: int, threads: int) -> float:
    barrier = threading.Barrier(threads)
    per_thread = n // threads

    def run(t: int) -> None:
        try:
            barrier.wait()
            for i in range(per_thread):
                fn(t * per_thread + i)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return round(per_thread * threads / (time.perf_counter() - start), 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--conditions", type=int, default=3)
    parser.add_argument("--participants", type=int, default=600)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("bench/enrollment.py needs PostgreSQL: set DATABASE_URL.")

    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        study = build_study(args.prompts, args.conditions)
        baseline = Study.objects.create(slug="bench-baseline", title="Baseline", state=Study.State.LIVE)
        baseline.arm = Condition.objects.create(study=baseline, name="arm0").pk
        responses = list(Response.objects.filter(condition__study=study).values_list("id", flat=True)[:10])

        sequential = timed(
            lambda i: participant_enroll(study=study, external_id=f"seq{i}"), args.participants
        )
        base_seq = timed(lambda i: baseline_enroll(baseline, f"base{i}", responses), args.participants)
        flow_rate = concurrent(
            lambda i: participant_enroll(study=study, external_id=f"con{i}"), args.participants, args.threads
        )
        base_rate = concurrent(
            lambda i: baseline_enroll(baseline, f"bcon{i}", responses), args.participants, args.threads
        )

        counts = [
            Participant.objects.filter(study=study, condition=c).count() for c in study.conditions.all()
        ]
        result = {
            "benchmark": "enrollment",
            "prompts": args.prompts,
            "conditions": args.conditions,
            "items_per_participant": 10,
            "participants_sequential": args.participants,
            "threads": args.threads,
            "enroll_sequential": percentiles(sequential),
            "baseline_sequential": percentiles(base_seq),
            "overhead_ratio_p50": round(statistics.median(sequential) / statistics.median(base_seq), 2),
            "enroll_concurrent_per_s": flow_rate,
            "baseline_concurrent_per_s": base_rate,
            "condition_sizes": counts,
            "condition_spread": max(counts) - min(counts),
        }
    finally:
        connections.close_all()
        connection.creation.destroy_test_db(old_name, verbosity=0)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
