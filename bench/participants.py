"""A Prolific launch on this machine: simulated participants through the whole flow, against the production
shape (gunicorn + PostgreSQL + Redis), and the floor of the same stack measured in the same run.

    .venv/bin/python bench/participants.py [--participants 300] [--arrival-seconds 60] [--think-ms 12000]

Prints ONE JSON object (progress goes to stderr). Phases, all against one server:

1. launch: `--participants` arrive at random moments within `--arrival-seconds`; each walks entry → consent
   → instructions → (TEQ) → 10 rating pages → completion, thinking `--think-ms` (±50 %) per rating page
   and half that on consent and instructions. Latency percentiles per page kind and method; answers
   acknowledged vs stored; balance. The default think time is realistic and still hurried: 12 s to read a
   situation, an utterance and a reply and pick an answer puts a whole visit at about 2.5 minutes, where
   the seed study's participants took 9–10 (Welivita et al., arXiv 2406.05063).
2. stress: the same arrival with `--stress-think-ms` (default 2.5 s per rating page, a visit in about 30 s):
   five times the realistic request rate, to show the headroom. Reported apart; 0 participants skips it.
3. saturation, alternating in --rounds slices so all see the same background load:
   floor: `--concurrency` clients POST back to back to a view that writes one row (full middleware stack);
   page ceiling: the same clients GET a view doing everything a rating page does except the study's
   own work — session read, rate limiter, honeypot, CSRF token, the item template — with no query;
   flow: `--concurrency` clients run whole participants back to back with no think time.

ratio_to_floor = flow requests/s ÷ floor requests/s at the same concurrency on the same server: the
share of the stack's raw capacity (one HTTP request + one INSERT) the participant flow keeps per request.
page_ceiling_ratio_to_floor is the same for the page ceiling: how much of that capacity a participant
page has left before it reads or writes anything of the study (the bound on ratio_to_floor).
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
from bench.lib.journey import Recorder, entry_path, percentiles, run_participant, run_wave  # noqa: E402
from bench.lib.stack import DEFAULT_CORPUS, Stack, log  # noqa: E402
from bench.lib.study import COMPLETION_CODE, outcomes_check, study_seed  # noqa: E402


def launch_phase(
    stack: Stack, *, slug: str, participants: int, arrival: float, think: float, seed: int, name: str
):
    return run_wave(
        base_url=stack.base_url,
        slug=slug,
        participants=participants,
        arrival_seconds=arrival,
        think_seconds=think,
        seed=seed,
        id_prefix=f"{name}-",
        completion_marker=COMPLETION_CODE,
        progress=lambda message: log(f"{name}: {message}"),
    )


def wave_report(recorder, outcomes, seconds: float, client_cpu: float, check: dict) -> dict:
    answers_window = (recorder.last or 0) - (recorder.first or 0)
    server_errors = sum(
        n for status, n in recorder.statuses.items() if status.startswith("5") or status == "0"
    )
    return {
        "participants_completed": sum(o.completed for o in outcomes),
        "participants_failed": [{"id": o.external_id, "error": o.error} for o in outcomes if not o.completed][
            :10
        ],
        "seconds": round(seconds, 1),
        # CPU the simulated browsers themselves used (parsing pages), taken from the same machine's cores.
        "client_cpu_share_of_one_core": round(client_cpu / seconds, 2),
        "requests": recorder.requests,
        "requests_per_s": round(recorder.requests / answers_window, 1) if answers_window else None,
        "statuses": recorder.statuses,
        "errors": server_errors,
        "answers_per_s": round(check["answers_acknowledged"] / answers_window, 2) if answers_window else None,
        "latency_by_page": recorder.summary(),
        "rating_page_latency": rating_latency(recorder),
        **check,
    }


def rating_latency(recorder) -> dict:
    return percentiles(recorder.samples.get("rating GET", []) + recorder.samples.get("rating POST", []))


def _in_window(recorder: Recorder, start: float, stop: float) -> int:
    """Requests answered inside the window, rate-limited ones (429) not counted."""
    return sum(
        1
        for end, _kind, _method, status in recorder.events
        if start <= end <= stop and 0 < status < 500 and status != 429
    )


def _clients(*, recorder: Recorder, concurrency: int, seconds: float, client) -> int:
    """Runs `client(worker, stop_at)` on `concurrency` threads for `seconds`; returns the requests the server
    answered inside that window (see `_in_window`)."""
    start = time.monotonic()
    stop_at = start + seconds
    threads = [
        threading.Thread(target=client, args=(worker, stop_at), daemon=True) for worker in range(concurrency)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return _in_window(recorder, start, stop_at)


def floor_slice(stack: Stack, *, recorder: Recorder, concurrency: int, seconds: float) -> int:
    """`concurrency` clients POST to the one-row-write view back to back."""

    def hammer(_worker: int, stop_at: float) -> None:
        browser = Browser(stack.base_url, client_ip="10.255.0.1", record=recorder, retry_seconds=0)
        while time.monotonic() < stop_at:
            browser.request("floor", "POST", "/bench/floor/", {})

    return _clients(recorder=recorder, concurrency=concurrency, seconds=seconds, client=hammer)


def ceiling_slice(stack: Stack, *, recorder: Recorder, concurrency: int, seconds: float) -> int:
    """`concurrency` clients GET the page-ceiling view back to back, each with a session of its own (the
    first request stores it; the others read it from Redis as participant pages do). Each client starts
    a new session from a new address every 50 requests, as new participants would: the production rate
    limits stay on, and no client reaches them (60 requests a minute per participant)."""

    def hammer(worker: int, stop_at: float) -> None:
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            browser = Browser(
                stack.base_url,
                client_ip=f"10.{250 - worker}.{n // 256 % 256}.{n % 256}",
                record=recorder,
                retry_seconds=0,
            )
            for _ in range(50):
                if time.monotonic() >= stop_at:
                    break
                browser.request("ceiling", "GET", "/bench/page/")

    return _clients(recorder=recorder, concurrency=concurrency, seconds=seconds, client=hammer)


def flow_slice(
    stack: Stack,
    *,
    recorder: Recorder,
    outcomes: list,
    slug: str,
    concurrency: int,
    seconds: float,
    seed: int,
) -> int:
    """`concurrency` clients run whole participants back to back with no think time. Requests finishing
    inside the window are counted; participants under way at its end are finished (not counted), so
    nobody is left half-way to upset the balance figures."""
    lock = threading.Lock()

    def loop(worker: int, stop_at: float) -> None:
        rng = random.Random(seed * 1000 + worker)
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            external_id = f"sat{seed:03d}w{worker:03d}x{n:05d}"
            outcome = run_participant(
                base_url=stack.base_url,
                entry_path=entry_path(slug, external_id),
                external_id=external_id,
                client_ip=f"10.{200 + seed % 50}.{worker}.{n % 256}",
                recorder=recorder,
                think_seconds=0.0,
                completion_marker=COMPLETION_CODE,
                rng=rng,
            )
            with lock:
                outcomes.append(outcome)

    return _clients(recorder=recorder, concurrency=concurrency, seconds=seconds, client=loop)


def saturation_phase(
    stack: Stack, *, slug: str, concurrency: int, seconds: float, rounds: int, seed: int
) -> dict:
    """The floor, the page ceiling and the flow at the same concurrency, alternated in `rounds` slices each
    so that all see the same background load of the machine (which other processes may share). Each gets
    `seconds` in all, so their request counts compare directly."""
    recorders = {"floor": Recorder(), "ceiling": Recorder(), "flow": Recorder()}
    done = dict.fromkeys(recorders, 0)
    outcomes: list = []
    per_slice = seconds / rounds
    for r in range(rounds):
        for name, target in (("floor", floor_slice), ("ceiling", ceiling_slice)):
            done[name] += target(stack, recorder=recorders[name], concurrency=concurrency, seconds=per_slice)
        done["flow"] += flow_slice(
            stack,
            recorder=recorders["flow"],
            outcomes=outcomes,
            slug=slug,
            concurrency=concurrency,
            seconds=per_slice,
            seed=seed * 10 + r,
        )
        elapsed = per_slice * (r + 1)
        log(
            f"saturation round {r + 1}/{rounds}: floor {done['floor'] / elapsed:.0f} req/s, "
            f"page ceiling {done['ceiling'] / elapsed:.0f} req/s, flow {done['flow'] / elapsed:.0f} req/s"
        )

    def throughput(name: str, **details) -> dict:
        return {
            "requests_in_window": done[name],
            "seconds": round(seconds, 1),
            "requests_per_s": round(done[name] / seconds, 1),
            **details,
            "statuses": recorders[name].statuses,
        }

    return {
        "floor": throughput("floor", latency=percentiles(recorders["floor"].samples.get("floor POST", []))),
        "ceiling": throughput(
            "ceiling", latency=percentiles(recorders["ceiling"].samples.get("ceiling GET", []))
        ),
        "flow": throughput(
            "flow",
            participants_completed=sum(o.completed for o in outcomes),
            answers_acknowledged=sum(len(o.acknowledged) for o in outcomes),
            latency_by_page=recorders["flow"].summary(),
        ),
        "outcomes": outcomes,
        # Same seconds for all three: the ratios of their request counts are the ratios of their rates.
        "ratio": done["flow"] / done["floor"] if done["floor"] else None,
        "ceiling_ratio": done["ceiling"] / done["floor"] if done["floor"] else None,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--participants", type=int, default=300)
    parser.add_argument("--arrival-seconds", type=float, default=60.0)
    parser.add_argument("--think-ms", type=float, default=12000.0, help="mean think time per rating page")
    parser.add_argument("--stress-participants", type=int, default=None, help="default: --participants")
    parser.add_argument("--stress-think-ms", type=float, default=2500.0)
    parser.add_argument("--teq", action="store_true", help="ask the TEQ before rating")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument(
        "--concurrency", type=int, default=8, help="clients in the floor and saturation phases"
    )
    parser.add_argument("--saturation-seconds", type=float, default=24.0, help="for each of floor and flow")
    parser.add_argument("--rounds", type=int, default=3, help="alternating floor/flow slices")
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/6"))
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    slug = "launch"
    with Stack(workers=args.workers, redis_url=args.redis_url) as stack:
        stack.django_setup()
        seeded = study_seed(stack, slug=slug, corpus=args.corpus, ask_teq=args.teq, quota_per_condition=1000)
        stack.start_server()

        waves = {}
        stress_participants = (
            args.participants if args.stress_participants is None else args.stress_participants
        )
        for name, count, think in (
            ("launch", args.participants, args.think_ms),
            ("stress", stress_participants, args.stress_think_ms),
        ):
            if not count:
                continue
            log(f"{name}: {count} participants within {args.arrival_seconds:.0f}s, think {think:.0f} ms")
            client_cpu_start = time.process_time()
            recorder, outcomes, seconds = launch_phase(
                stack,
                slug=slug,
                participants=count,
                arrival=args.arrival_seconds,
                think=think / 1000,
                seed=args.seed + len(waves),
                name=name,
            )
            check = outcomes_check(slug=slug, outcomes=outcomes, id_prefix=f"{name}-")
            waves[name] = (
                recorder,
                outcomes,
                wave_report(recorder, outcomes, seconds, time.process_time() - client_cpu_start, check),
            )

        log(f"floor and flow at saturation: {args.concurrency} clients, {args.saturation_seconds:.0f}s each")
        saturation = saturation_phase(
            stack,
            slug=slug,
            concurrency=args.concurrency,
            seconds=args.saturation_seconds,
            rounds=args.rounds,
            seed=args.seed,
        )
        all_outcomes = [o for _r, outcomes, _w in waves.values() for o in outcomes]
        final_check = outcomes_check(slug=slug, outcomes=all_outcomes + saturation["outcomes"])

    launch = waves["launch"][2]
    rating = launch["rating_page_latency"]
    ratio = saturation["ratio"]
    result = {
        "benchmark": "participants",
        "setup": {
            "participants": args.participants,
            "arrival_seconds": args.arrival_seconds,
            "think_ms_mean": args.think_ms,
            "stress_think_ms_mean": args.stress_think_ms,
            "teq": args.teq,
            "gunicorn_workers": args.workers,
            "concurrency_floor_and_saturation": args.concurrency,
            "saturation_seconds": args.saturation_seconds,
            "cpu_count": os.cpu_count(),
            "study": seeded,
            "note": "client threads run on the same machine as the server and compete for its CPUs",
        },
        "launch": launch,
        "stress": waves["stress"][2] if "stress" in waves else None,
        "floor": saturation["floor"],
        "page_ceiling": saturation["ceiling"],
        "flow_at_saturation": saturation["flow"],
        "ratio_to_floor": round(ratio, 3) if ratio else None,
        "page_ceiling_ratio_to_floor": round(saturation["ceiling_ratio"], 3)
        if saturation["ceiling_ratio"]
        else None,
        "ratio_definition": (
            "requests/s of the participant flow (every GET and POST: entry, consent, instructions, rating and "
            "completion pages; redirects followed as separate requests) with --concurrency clients and no think "
            "time, divided by requests/s of the one-row-write floor view (POST, full middleware stack, one INSERT) "
            "with the same --concurrency clients, same server, same run; the two alternate in --rounds slices "
            "so both see the same background load; only requests finishing inside a slice are counted"
        ),
        "page_ceiling_definition": (
            "requests/s of /bench/page/ over the floor's: a GET doing what every participant page does that is "
            "not the study's own work (session read from Redis, rate limiter, honeypot, CSRF token, the item "
            "template rendered) with no database query; the best ratio_to_floor any participant page could reach"
        ),
        "after_all_phases": final_check,
        "goals": {
            "rating_page_p99_ms_lt_200": rating.get("p99_ms", 1e9) < 200,
            "ratio_to_floor_ge_0_5": bool(ratio) and ratio >= 0.5,
            "answers_lost_eq_0": final_check["answers_lost"] == 0,
            "duplicates_eq_0": final_check["duplicates"] == 0,
            "condition_imbalance_le_1": final_check["condition_imbalance"] <= 1,
        },
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
