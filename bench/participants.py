"""A Prolific launch on this machine: simulated participants through the whole flow, against the production
shape (gunicorn + PostgreSQL + Redis), and the floor of the same stack measured in the same run.

    .venv/bin/python bench/participants.py [--participants 300] [--arrival-seconds 60] [--think-ms 2500]

Prints ONE JSON object (progress goes to stderr). Phases, all against one server:

1. launch: `--participants` arrive at random moments within `--arrival-seconds`; each walks entry → consent
   → instructions → (TEQ) → 10 rating pages → completion, thinking `--think-ms` (±50 %) per rating page.
   Latency percentiles per page kind and method; answers acknowledged vs stored; balance.
2. floor: `--concurrency` clients POST to a view that writes one row (through the full middleware stack),
   back to back, for `--saturation-seconds`.
3. flow at saturation: `--concurrency` clients run participants back to back with no think time for
   `--saturation-seconds`.

ratio_to_floor = flow requests/s at saturation ÷ floor requests/s, same concurrency, same server: the
share of the stack's raw capacity (one HTTP request + one INSERT) the participant flow keeps per request.
Everything is torn down at the end: gunicorn killed, the database dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lib.browser import Browser  # noqa: E402
from bench.lib.journey import Recorder, percentiles, run_participant  # noqa: E402
from bench.lib.stack import DEFAULT_CORPUS, Stack, log  # noqa: E402
from bench.lib.study import COMPLETION_CODE, outcomes_check, study_seed  # noqa: E402


def entry_path(slug: str, external_id: str) -> str:
    return f"/s/{slug}/?PROLIFIC_PID={external_id}&STUDY_ID=bench-study&SESSION_ID=s-{external_id}"


def launch_phase(stack: Stack, *, slug: str, participants: int, arrival: float, think: float, seed: int):
    recorder = Recorder()
    outcomes = []
    lock = threading.Lock()
    rng = random.Random(seed)
    starts = sorted(rng.uniform(0, arrival) for _ in range(participants))
    t0 = time.monotonic()

    def one(i: int, start: float) -> None:
        time.sleep(max(0.0, t0 + start - time.monotonic()))
        external_id = f"{rng.getrandbits(64):016x}{i:04d}"  # Prolific ids are 24 hex characters
        outcome = run_participant(
            base_url=stack.base_url,
            entry_path=entry_path(slug, external_id),
            external_id=external_id,
            client_ip=f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}",
            recorder=recorder,
            think_seconds=think,
            completion_marker=COMPLETION_CODE,
            rng=random.Random(seed * 100_003 + i),
        )
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=one, args=(i, s), daemon=True) for i, s in enumerate(starts)]
    for thread in threads:
        thread.start()
    last_report = time.monotonic()
    while any(t.is_alive() for t in threads):
        time.sleep(1)
        if time.monotonic() - last_report > 15:
            last_report = time.monotonic()
            log(f"launch: {len(outcomes)}/{participants} finished, {recorder.requests} requests")
    return recorder, outcomes, time.monotonic() - t0


def floor_phase(stack: Stack, *, concurrency: int, seconds: float) -> dict:
    recorder = Recorder()
    stop_at = time.monotonic() + seconds

    def hammer() -> None:
        browser = Browser(stack.base_url, client_ip="10.255.0.1", record=recorder, retry_seconds=0)
        while time.monotonic() < stop_at:
            browser.request("floor", "POST", "/bench/floor/", {})

    started = time.monotonic()
    threads = [threading.Thread(target=hammer, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    ok = recorder.statuses.get("200", 0)
    return {
        "requests": recorder.requests,
        "ok": ok,
        "requests_per_s": round(recorder.requests / elapsed, 1),
        "latency": percentiles(recorder.samples.get("floor POST", [])),
        "statuses": recorder.statuses,
    }


def saturation_phase(stack: Stack, *, slug: str, concurrency: int, seconds: float, seed: int) -> tuple:
    recorder = Recorder()
    outcomes = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    counter = iter(range(10**9))

    def loop(worker: int) -> None:
        rng = random.Random(seed + worker)
        while time.monotonic() < stop_at:
            with lock:
                n = next(counter)
            external_id = f"sat{worker:03d}x{n:06d}"
            outcome = run_participant(
                base_url=stack.base_url,
                entry_path=entry_path(slug, external_id),
                external_id=external_id,
                client_ip=f"10.254.{n // 256 % 256}.{n % 256}",
                recorder=recorder,
                think_seconds=0.0,
                completion_marker=COMPLETION_CODE,
                rng=rng,
            )
            with lock:
                outcomes.append(outcome)

    started = time.monotonic()
    threads = [threading.Thread(target=loop, args=(w,), daemon=True) for w in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    return recorder, outcomes, elapsed


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--participants", type=int, default=300)
    parser.add_argument("--arrival-seconds", type=float, default=60.0)
    parser.add_argument("--think-ms", type=float, default=2500.0, help="mean think time per rating page")
    parser.add_argument("--teq", action="store_true", help="ask the TEQ before rating")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument(
        "--concurrency", type=int, default=8, help="clients in the floor and saturation phases"
    )
    parser.add_argument("--saturation-seconds", type=float, default=20.0)
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/6"))
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    slug = "launch"
    with Stack(workers=args.workers, redis_url=args.redis_url) as stack:
        stack.django_setup()
        seeded = study_seed(stack, slug=slug, corpus=args.corpus, ask_teq=args.teq, quota_per_condition=200)
        stack.start_server()

        log(
            f"launch: {args.participants} participants within {args.arrival_seconds:.0f}s, think {args.think_ms:.0f} ms"
        )
        recorder, outcomes, launch_seconds = launch_phase(
            stack,
            slug=slug,
            participants=args.participants,
            arrival=args.arrival_seconds,
            think=args.think_ms / 1000,
            seed=args.seed,
        )
        launch_check = outcomes_check(slug=slug, outcomes=outcomes)
        answers_window = (recorder.last or 0) - (recorder.first or 0)

        log(f"floor: {args.concurrency} clients for {args.saturation_seconds:.0f}s")
        floor = floor_phase(stack, concurrency=args.concurrency, seconds=args.saturation_seconds)
        log(f"flow at saturation: {args.concurrency} clients for {args.saturation_seconds:.0f}s")
        sat_recorder, sat_outcomes, sat_seconds = saturation_phase(
            stack, slug=slug, concurrency=args.concurrency, seconds=args.saturation_seconds, seed=args.seed
        )
        final_check = outcomes_check(slug=slug, outcomes=outcomes + sat_outcomes)
        server_errors = sum(
            n for status, n in recorder.statuses.items() if status.startswith("5") or status == "0"
        )

    flow_rps = sat_recorder.requests / sat_seconds
    rating_latency = percentiles(
        recorder.samples.get("rating GET", []) + recorder.samples.get("rating POST", [])
    )
    acknowledged = launch_check["answers_acknowledged"]
    result = {
        "benchmark": "participants",
        "setup": {
            "participants": args.participants,
            "arrival_seconds": args.arrival_seconds,
            "think_ms_mean": args.think_ms,
            "teq": args.teq,
            "gunicorn_workers": args.workers,
            "concurrency_floor_and_saturation": args.concurrency,
            "saturation_seconds": args.saturation_seconds,
            "cpu_count": os.cpu_count(),
            "study": seeded,
            "note": "client threads run on the same machine as the server and compete for its CPUs",
        },
        "launch": {
            "participants_completed": sum(o.completed for o in outcomes),
            "participants_failed": [
                {"id": o.external_id, "error": o.error} for o in outcomes if not o.completed
            ][:10],
            "seconds": round(launch_seconds, 1),
            "requests": recorder.requests,
            "statuses": recorder.statuses,
            "errors": server_errors,
            "answers_per_s": round(acknowledged / answers_window, 2) if answers_window else None,
            "latency_by_page": recorder.summary(),
            "rating_page_latency": rating_latency,
            **launch_check,
        },
        "floor": floor,
        "flow_at_saturation": {
            "participants_completed": sum(o.completed for o in sat_outcomes),
            "requests": sat_recorder.requests,
            "requests_per_s": round(flow_rps, 1),
            "answers_per_s": round(sum(len(o.acknowledged) for o in sat_outcomes) / sat_seconds, 1),
            "latency_by_page": sat_recorder.summary(),
            "statuses": sat_recorder.statuses,
        },
        "ratio_to_floor": round(flow_rps / floor["requests_per_s"], 3) if floor["requests_per_s"] else None,
        "ratio_definition": (
            "requests/s of the participant flow (every GET and POST of entry, consent, instructions, rating and "
            "completion pages) with --concurrency clients and no think time, divided by requests/s of the "
            "one-row-write floor view with the same --concurrency clients, same server, same run"
        ),
        "after_all_phases": final_check,
        "goals": {
            "rating_page_p99_ms_lt_200": rating_latency.get("p99_ms", 1e9) < 200,
            "ratio_to_floor_ge_0_5": bool(floor["requests_per_s"])
            and flow_rps / floor["requests_per_s"] >= 0.5,
            "answers_lost_eq_0": final_check["answers_lost"] == 0,
            "duplicates_eq_0": final_check["duplicates"] == 0,
            "condition_imbalance_le_1": final_check["condition_imbalance"] <= 1,
        },
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
