"""Faults during a launch, on this machine's real services; asserts and prints ONE JSON object.

    .venv/bin/python bench/faults.py [--participants 40] [--think-ms 700]

Against the production shape of bench/participants.py (gunicorn, PostgreSQL, Redis), three waves of
participants walk the whole flow; their browsers retry on 5xx or a dropped connection like a person
pressing reload (resubmitting the same form). During each wave one fault is injected:

1. worker_killed: a gunicorn worker is SIGKILLed twice mid-load (the master starts new ones);
2. redis_stopped: the machine's Redis is shut down for --redis-down-seconds, then started again;
   participants must keep rating meanwhile (the cache and the rate limiter fail open);
3. postgres_restarted: the machine's PostgreSQL cluster is restarted once (this briefly disconnects
   every client of it, so it happens exactly once per run).

Asserted for each wave: every answer acknowledged with a 2xx/3xx is stored (answers_lost = 0), no
assignment holds two ratings (duplicates = 0), and every participant reaches the completion page.
For Redis: rating answers were accepted while it was down, with no 5xx. Services are ALWAYS restored
(try/finally), even when the script fails. Exit status 1 when an assertion fails.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lib.journey import run_wave  # noqa: E402
from bench.lib.stack import DEFAULT_CORPUS, Stack, log  # noqa: E402
from bench.lib.study import COMPLETION_CODE, outcomes_check, study_seed  # noqa: E402

REDIS_START = [
    "redis-server",
    "--daemonize",
    "yes",
    "--bind",
    "127.0.0.1",
    "-::1",
    "--port",
    "6379",
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    "/var/lib/redis",
    "--logfile",
    "/var/log/redis/ci.log",
]


def _run(command: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def redis_up() -> bool:
    try:
        return (
            _run(["redis-cli", "-h", "127.0.0.1", "-p", "6379", "ping"], timeout=5).stdout.strip() == "PONG"
        )
    except (subprocess.TimeoutExpired, OSError):
        return False


def redis_restore() -> None:
    if redis_up():
        return
    log("starting Redis again")
    _run(REDIS_START)
    for _ in range(50):
        if redis_up():
            return
        time.sleep(0.1)
    raise RuntimeError("Redis did not come back: start it with " + " ".join(REDIS_START))


def postgres_cluster() -> str:
    versions = sorted(os.listdir("/etc/postgresql"))
    return versions[-1]


def postgres_up() -> bool:
    return _run(["pg_isready", "-h", "127.0.0.1", "-p", "5432", "-t", "2"], timeout=10).returncode == 0


def postgres_restore() -> None:
    if postgres_up():
        return
    log("starting PostgreSQL again")
    _run(["pg_ctlcluster", "--skip-systemctl-redirect", postgres_cluster(), "main", "start"], timeout=120)
    for _ in range(100):
        if postgres_up():
            return
        time.sleep(0.2)
    raise RuntimeError("PostgreSQL did not come back")


def wave(stack: Stack, *, name: str, slug: str, args, seed: int, fault) -> dict:
    """Runs one wave with `fault(stack, marks)` called on a thread `--fault-after` seconds in."""
    marks: dict = {}

    def inject() -> None:
        time.sleep(args.fault_after)
        try:
            fault(stack, marks)
        except Exception as exc:  # reported in the JSON; restoring happens in the caller's finally
            marks["fault_error"] = repr(exc)

    injector = threading.Thread(target=inject, daemon=True)
    injector.start()
    recorder, outcomes, seconds = run_wave(
        base_url=stack.base_url,
        slug=slug,
        participants=args.participants,
        arrival_seconds=args.arrival_seconds,
        think_seconds=args.think_ms / 1000,
        seed=seed,
        id_prefix=name[:3],
        completion_marker=COMPLETION_CODE,
        retry_seconds=90,
        progress=lambda message: log(f"{name}: {message}"),
    )
    injector.join()
    from django.db import connections

    connections.close_all()  # this process's connection died too if PostgreSQL restarted
    check = outcomes_check(slug=slug, outcomes=outcomes, id_prefix=name[:3])
    failures = [s for s, n in recorder.statuses.items() if (s.startswith("5") or s == "0") for _ in range(n)]
    result = {
        "participants": args.participants,
        "participants_completed": sum(o.completed for o in outcomes),
        "not_completed": [{"id": o.external_id, "error": o.error} for o in outcomes if not o.completed][:5],
        "seconds": round(seconds, 1),
        "requests": recorder.requests,
        "statuses": recorder.statuses,
        "failed_attempts_retried": len(failures),
        "posts_resubmitted": sum(o.retried_posts for o in outcomes),
        "answers_acknowledged": check["answers_acknowledged"],
        "ratings_stored": check["ratings_stored"],
        "answers_lost": check["answers_lost"],
        "duplicates": check["duplicates"],
        "fault": {k: v for k, v in marks.items() if not k.startswith("_")},
    }
    if "down_at" in marks and "up_at" in marks:
        window = [e for e in recorder.events if marks["down_at"] <= e[0] <= marks["up_at"]]
        result["while_down"] = {
            "seconds": round(marks["up_at"] - marks["down_at"], 1),
            "requests": len(window),
            "rating_answers_accepted": sum(
                1 for e in window if e[1] == "rating" and e[2] == "POST" and 200 <= e[3] < 400
            ),
            "server_errors": sum(1 for e in window if e[3] >= 500 or e[3] == 0),
        }
        result["fault"].pop("down_at")
        result["fault"].pop("up_at")
    result["assertions"] = {
        "every_acknowledged_answer_stored": check["answers_lost"] == 0,
        "no_duplicates": check["duplicates"] == 0,
        "every_participant_completed": result["participants_completed"] == args.participants,
        "fault_injected": "fault_error" not in marks,
    }
    return result


def kill_workers(stack: Stack, marks: dict) -> None:
    killed = []
    for _ in range(2):
        pid = stack.worker_pids()[0]
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
        time.sleep(3)
    marks["workers_killed"] = len(killed)


def stop_redis(seconds: float):
    def fault(stack: Stack, marks: dict) -> None:
        try:
            _run(["redis-cli", "-h", "127.0.0.1", "-p", "6379", "shutdown", "nosave"], timeout=10)
            marks["down_at"] = time.monotonic()
            marks["redis_was_down"] = not redis_up()
            time.sleep(seconds)
        finally:
            redis_restore()
            marks["up_at"] = time.monotonic()

    return fault


def restart_postgres(stack: Stack, marks: dict) -> None:
    started = time.monotonic()
    try:
        done = _run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", postgres_cluster(), "main", "restart"], timeout=120
        )
        marks["restart_exit_status"] = done.returncode
    finally:
        postgres_restore()
        marks["restart_seconds"] = round(time.monotonic() - started, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--participants", type=int, default=40, help="per wave")
    parser.add_argument("--arrival-seconds", type=float, default=10.0)
    parser.add_argument("--think-ms", type=float, default=700.0)
    parser.add_argument("--fault-after", type=float, default=8.0, help="seconds into each wave")
    parser.add_argument("--redis-down-seconds", type=float, default=6.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--skip-postgres", action="store_true", help="leave PostgreSQL alone")
    args = parser.parse_args(argv)

    slug = "faults"
    results: dict = {"benchmark": "faults", "setup": {k: str(v) for k, v in vars(args).items()}}
    try:
        with Stack(workers=args.workers, name="faults") as stack:
            stack.django_setup()
            study_seed(stack, slug=slug, corpus=args.corpus, ask_teq=False, quota_per_condition=200)
            stack.start_server()
            results["worker_killed"] = wave(
                stack, name="worker", slug=slug, args=args, seed=11, fault=kill_workers
            )
            results["redis_stopped"] = wave(
                stack, name="redis", slug=slug, args=args, seed=12, fault=stop_redis(args.redis_down_seconds)
            )
            rs = results["redis_stopped"]
            rs["assertions"]["ratings_accepted_while_redis_down"] = (
                rs.get("while_down", {}).get("rating_answers_accepted", 0) > 0
            )
            rs["assertions"]["no_server_errors_while_redis_down"] = (
                rs.get("while_down", {}).get("server_errors", 1) == 0
            )
            if not args.skip_postgres:
                results["postgres_restarted"] = wave(
                    stack, name="postgres", slug=slug, args=args, seed=13, fault=restart_postgres
                )
    finally:
        redis_restore()
        postgres_restore()
    passed = all(
        all(part["assertions"].values())
        for key, part in results.items()
        if isinstance(part, dict) and "assertions" in part
    )
    results["passed"] = passed
    print(json.dumps(results, indent=2))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
