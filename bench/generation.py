"""Benchmark: pre-generating a study's LLM responses on real Celery workers against rate-limited providers.

2,000 prompts × 4 LLM conditions; each condition has its own loopback provider (200 ms latency) limited to 600
requests per minute, so the four limits are independent and the ideal run takes 2,000 / 10 per second = 200 s.
Reports the achieved request rate as a fraction of the limits (goal ≥ 0.9), duplicates (responses stored twice for
one slot, goal 0), lost slots (slots without a response at the end, goal 0), extra provider calls, and wall time.
Baseline measured in the same run: the rate the shared limiter admits on its own (no Celery, no database, no HTTP).

Standalone: creates its own PostgreSQL database (empathy_bench_generation, dropped afterwards) and starts its own
worker processes on Redis (BENCH_REDIS_URL, default redis://127.0.0.1:6379/3) on a queue of its own.

    .venv/bin/python bench/generation.py [--prompts 2000] [--conditions 4] [--rpm 600] [--workers 2] [--threads 16]
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.celery_worker import celery_worker_command  # noqa: E402

PG_ADMIN = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")
DB_NAME = os.environ.get("BENCH_GENERATION_DB", "empathy_bench_generation")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/3")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--conditions", type=int, default=4)
    parser.add_argument("--rpm", type=int, default=600, help="Requests per minute per provider.")
    parser.add_argument("--latency", type=float, default=0.2, help="Loopback provider latency, seconds.")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes.")
    parser.add_argument("--threads", type=int, default=16, help="Threads per worker process.")
    parser.add_argument("--keep-db", action="store_true")
    return parser.parse_args()


# --- the loopback provider ----------------------------------------------------------------------------------


class Loopback:
    """An OpenAI-compatible endpoint per provider (/p<N>/v1/chat/completions) that answers after `latency`."""

    def __init__(self, latency: float):
        self.latency = latency
        self.lock = threading.Lock()
        self.stamps: dict[str, list[float]] = {}
        loopback = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                self.rfile.read(length)
                provider = self.path.split("/")[1]
                with loopback.lock:
                    loopback.stamps.setdefault(provider, []).append(time.time())
                time.sleep(loopback.latency)
                body = json.dumps(
                    {
                        "id": "chatcmpl-bench",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": "bench-model-0001",
                        "system_fingerprint": "fp_bench",
                        "choices": [
                            {
                                "index": 0,
                                "message": {
                                    "role": "assistant",
                                    "content": "That sounds really hard; I'm sorry.",
                                },
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 150, "completion_tokens": 9, "total_tokens": 159},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        ThreadingHTTPServer.daemon_threads = True
        ThreadingHTTPServer.request_queue_size = 256
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, provider_index: int) -> str:
        return f"http://127.0.0.1:{self.port}/p{provider_index}/v1"


# --- database -----------------------------------------------------------------------------------------------


def database_recreate():
    import psycopg2

    admin = psycopg2.connect(f"{PG_ADMIN}/postgres")
    admin.autocommit = True
    with admin.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        cursor.execute(f'CREATE DATABASE "{DB_NAME}"')
    admin.close()


def database_drop():
    import psycopg2

    admin = psycopg2.connect(f"{PG_ADMIN}/postgres")
    admin.autocommit = True
    with admin.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
    admin.close()


def limiter_baseline(rpm: int, seconds: float = 6.0) -> float:
    """The fraction of `rpm` the Redis limiter admits at its steady rate to 4 eager threads, with nothing else in
    the way (the ceiling is 1 - burst/rpm: the steady rate is lowered by the burst, see generation.ratelimit)."""
    from generation.ratelimit import LimitSpec, RateLimitWait, limiter_acquire, limiter_release, limiter_reset

    spec = LimitSpec(f"genlimit:bench-baseline:{uuid.uuid4().hex}", rpm, 100_000_000, 50, 10.0)
    limiter_reset(spec=spec)
    admitted = []
    stop = time.monotonic() + seconds

    def loop():
        while time.monotonic() < stop:
            try:
                lease = limiter_acquire(spec=spec, tokens=10, max_wait=1.0)
            except RateLimitWait:
                continue
            admitted.append(time.monotonic())
            limiter_release(lease=lease)

    threads = [threading.Thread(target=loop) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    admitted.sort()
    steady = admitted[int(spec.rpm_shape[1]) :]  # leave out the initial burst
    rate = (len(steady) - 1) / (steady[-1] - steady[0])
    limiter_reset(spec=spec)
    return rate * 60 / rpm


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its reaped children (Linux /proc), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / ticks


def main():
    args = parse_args()
    load_at_start = round(os.getloadavg()[0], 2)
    database_recreate()
    queue = f"bench-generation-{uuid.uuid4().hex[:8]}"
    os.environ.update(
        DATABASE_URL=f"{PG_ADMIN}/{DB_NAME}",
        REDIS_URL=REDIS_URL,
        DJANGO_ENV="test",
        GENERATION_QUEUE=queue,
        LOG_LEVEL="WARNING",
        BENCH_GENERATION_KEY="bench-key-not-secret",
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    workers = []
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from django.db.models import Count

        from generation.models import GenerationItem, LLMConditionConfig, Provider
        from generation.services.dispatch import generation_start
        from generation.services.prompts import generation_conditions
        from studies.models import Condition, Emotion, Prompt, Response, Study

        baseline_fraction = limiter_baseline(args.rpm)
        loopback = Loopback(args.latency)
        study = Study.objects.create(slug="bench-generation", title="Generation benchmark")
        emotions = list(Emotion.objects.all()) or [Emotion.objects.create(name="sad")]
        Prompt.objects.bulk_create(
            [
                Prompt(
                    study=study,
                    dialogue_id=f"bench:{i}",
                    emotion=emotions[i % len(emotions)],
                    situation=f"I lost my job yesterday after ten years there (case {i}).",
                    speaker_utterance="I don't know what to do now.",
                )
                for i in range(args.prompts)
            ],
            batch_size=1000,
        )
        for index in range(args.conditions):
            provider = Provider.objects.create(
                name=f"bench-{index}",
                base_url=loopback.url(index),
                api_key_env="BENCH_GENERATION_KEY",
                max_concurrency=8,
                requests_per_minute=args.rpm,
                tokens_per_minute=10_000_000,
                price_input_per_million=2.5,
                price_output_per_million=10,
                timeout_seconds=10,
            )
            condition = Condition.objects.create(study=study, name=f"llm{index}", kind=Condition.Kind.LLM)
            LLMConditionConfig.objects.create(
                condition=condition, provider=provider, model="bench-model", max_tokens=64
            )

        env = dict(os.environ)
        for n in range(args.workers):
            workers.append(
                subprocess.Popen(
                    celery_worker_command(queue=queue, name=f"bench{n}-{queue}@%h", concurrency=args.threads),
                    cwd=ROOT,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        slots = args.prompts * args.conditions
        started = time.time()
        generation_start(study=study, conditions=generation_conditions(study=study), via="bench")
        dispatched = time.time()
        ideal = args.prompts / (args.rpm / 60)
        deadline = started + max(3 * ideal, 120)
        while time.time() < deadline:
            if not GenerationItem.objects.filter(status__in=["pending", "running"]).exists():
                break
            time.sleep(1.0)
        finished = time.time()
        worker_cpu_s = sum(_cpu_seconds(process.pid) for process in workers)

        per_slot = (
            Response.objects.filter(condition__study=study)
            .values("prompt", "condition")
            .annotate(n=Count("id"))
        )
        duplicates = sum(row["n"] - 1 for row in per_slot if row["n"] > 1)
        lost = slots - len(per_slot)
        failed = GenerationItem.objects.filter(status="failed").count()
        fractions = {}
        for name, stamps in sorted(loopback.stamps.items()):
            stamps.sort()
            rate = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else 0
            fractions[name] = round(rate * 60 / args.rpm, 3)
        calls = sum(len(s) for s in loopback.stamps.values())
        wall = finished - started
        result = {
            "benchmark": "generation",
            "prompts": args.prompts,
            "conditions": args.conditions,
            "providers": args.conditions,
            "provider_layout": "one provider per condition, each limited separately",
            "rpm_limit_per_provider": args.rpm,
            "provider_latency_s": args.latency,
            "workers": args.workers,
            "threads_per_worker": args.threads,
            "slots": slots,
            "responses": len(per_slot),
            "duplicates": duplicates,
            "lost_slots": lost,
            "failed_items": failed,
            "provider_calls": calls,
            "extra_calls": calls - len(per_slot),
            "throughput_fraction_per_provider": fractions,
            "throughput_fraction_min": min(fractions.values()) if fractions else 0,
            "throughput_fraction_wall": round(calls / (wall * args.conditions * args.rpm / 60), 3),
            "dispatch_s": round(dispatched - started, 1),
            "wall_s": round(wall, 1),
            "ideal_wall_s": round(ideal, 1),
            "baseline_limiter_only_fraction": round(baseline_fraction, 3),
            "worker_cpu_ms_per_item": round(1000 * worker_cpu_s / max(calls, 1), 1),
            "load_average_1m_at_start": load_at_start,
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
            "cpu_cores": os.cpu_count(),
            "completed": lost == 0 and failed == 0,
        }
        print(json.dumps(result))
    finally:
        for process in workers:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
        try:
            import redis

            redis.Redis.from_url(REDIS_URL).delete(queue)
        except Exception as exc:  # cleanup must not hide the result
            print(f"could not delete the bench queue: {exc}", file=sys.stderr)
        from django.db import connections

        connections.close_all()
        if not args.keep_db:
            database_drop()


if __name__ == "__main__":
    main()
