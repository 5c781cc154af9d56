"""Replicas on this machine: three web processes behind nginx without stickiness, two Celery workers, beat, one
PostgreSQL and one Redis, while things go wrong. Prints ONE JSON object (progress on stderr).

    .venv/bin/python bench/replicas.py [--participants 500] [--arrival-seconds 90] [--think-ms 300]

The production shape (bench/lib/stack.py: DJANGO_ENV=production, a database of its own, the demo studies seeded):

* web: three gunicorn processes (2 ASGI workers each, config/asgi.py in uvicorn workers as docker-compose and the
  Helm chart run it) on three ports, one SECRET_KEY, behind Debian's nginx with
  the repository's proxy configuration (deploy/nginx/default.conf.template) and an upstream of the three,
  round-robin, no stickiness;
* two Celery workers on the default and generation queues, and beat;
* participants: `--participants` people over the three demo kinds (rating `demo`, questionnaire
  `feelings-demo`, pairwise `pairs-demo`), in turn, each from an address of their own, as a browser without
  JavaScript (bench/lib/journey.py: form posts, a request retried on 5xx or a dropped connection as a person
  pressing reload would);
* generation: `--prompts` LLM responses generated against a loopback provider (1 s a call) meanwhile.

Faults, by the clock: web process 2 is killed (SIGKILL, its workers with it) and started again 10 s later; worker 1
is killed mid-generation (SIGKILL) and started again; a second beat is started by mistake and left running.

Reported: participants completed; session losses (a participant sent back or refused mid-study) and CSRF failures
(403); answers acknowledged but not stored, and stored twice; condition imbalance per study (completed
participants); requests that failed while web 2 was down (nginx passes a refused connection on to the next process;
a request cut mid-way fails and is retried by its participant); generations lost or stored twice; and how often a
periodic task was sent twice within its interval, over every beat interval of the run (both beats' logs).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.abuse import Proxy  # noqa: E402
from bench.generation import Loopback  # noqa: E402
from bench.lib.journey import Recorder, entry_path, run_participant  # noqa: E402
from bench.lib.stack import BASE_DIR, PYTHON, WEB_APP, Stack, _admin_sql, free_port, log  # noqa: E402
from bench.lib.study import outcomes_check  # noqa: E402

KINDS = ("demo", "feelings-demo", "pairs-demo")
MARKER = "BENCHDONE7"
GENERATION_QUEUE = "generation"
_SENT = re.compile(r"^\[(?P<at>[^\],]+)[^\]]*\].*Sending due task (?P<name>\S+)")


class Processes:
    """The stack's web, worker and beat processes, each in a session of its own (killed as a group)."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.ports: list[int] = []
        for _ in range(3):  # none listens yet: each must differ from those already chosen
            self.ports.append(free_port(exclude=(stack.port, *self.ports)))
        self.web: dict[int, subprocess.Popen] = {}
        self.workers: dict[int, subprocess.Popen] = {}
        self.beats: list[subprocess.Popen] = []
        self.logs = stack.var_dir

    def _spawn(self, command: list[str], log_name: str) -> subprocess.Popen:
        return subprocess.Popen(
            command,
            cwd=BASE_DIR,
            env=self.stack.env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.logs / log_name, "ab"),  # noqa: SIM115 - closed with the process
            start_new_session=True,
        )

    def web_start(self, index: int) -> None:
        gunicorn = str(Path(PYTHON).parent / "gunicorn")
        bind = f"127.0.0.1:{self.ports[index]}"
        self.web[index] = self._spawn(
            [gunicorn, *WEB_APP, "--bind", bind, "--workers", "2", "--timeout", "30", "--preload"],
            f"web{index}.log",
        )

    def web_wait(self, index: int, timeout: float = 90) -> float:
        import urllib.request

        started = time.monotonic()
        while time.monotonic() - started < timeout:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.ports[index]}/healthz", timeout=2) as r:
                    if r.status == 200:
                        return time.monotonic() - started
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(
            f"web {index} did not come up: {(self.logs / f'web{index}.log').read_text()[-2000:]}"
        )

    def worker_start(self, index: int) -> None:
        # As the chart runs them: worker 0 on generation's queue alone (a long analysis never holds up an LLM
        # call), worker 1 on the default queue and generation's.
        queues = GENERATION_QUEUE if index == 0 else f"celery,{GENERATION_QUEUE}"
        command = [PYTHON, "-m", "celery", "-A", "config", "worker", "-Q", queues]
        command += ["--concurrency", "2", "--loglevel", "INFO", "-n", f"w{index}@%h", "--without-mingle"]
        self.workers[index] = self._spawn(command, f"worker{index}.log")

    def beat_start(self) -> None:
        index = len(self.beats)
        schedule = str(self.logs / f"beat{index}-schedule")
        command = [
            PYTHON,
            "-m",
            "celery",
            "-A",
            "config",
            "beat",
            "--loglevel",
            "INFO",
            "--schedule",
            schedule,
        ]
        self.beats.append(self._spawn(command, f"beat{index}.log"))

    @staticmethod
    def kill(process: subprocess.Popen) -> None:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)

    def stop_all(self) -> None:
        for process in [*self.web.values(), *self.workers.values(), *self.beats]:
            self.kill(process)

    def sends(self) -> dict[str, list[float]]:
        """{periodic task: times it was sent}, from every beat's log."""
        from datetime import datetime

        found: dict[str, list[float]] = {}
        for path in sorted(self.logs.glob("beat*.log")):
            for line in path.read_text(errors="replace").splitlines():
                match = _SENT.search(line)
                if match:
                    at = datetime.strptime(match["at"].strip(), "%Y-%m-%d %H:%M:%S").timestamp()
                    found.setdefault(match["name"], []).append(at)
        return found


def studies_prepare() -> None:
    """The three demo studies as Prolific studies with room for everyone and a completion code to look for."""
    from studies.models import Study

    Study.objects.filter(slug__in=KINDS).update(
        platform=Study.Platform.PROLIFIC,
        quota_per_condition=100_000,
        completion_code=MARKER,
        failed_checks_code=MARKER,  # random answers fail attention checks: those participants finish too
        completion_redirect_url="",
        enrollments_per_address=None,
    )


def generation_prepare(loopback: Loopback, prompts: int):
    from generation.models import LLMConditionConfig, Provider
    from studies.models import Condition, Emotion, Prompt, Study

    study = Study.objects.create(slug="replicas-generation", title="Generation under replicas")
    emotion = Emotion.objects.first() or Emotion.objects.create(name="sad")
    Prompt.objects.bulk_create(
        [
            Prompt(
                study=study,
                dialogue_id=f"replicas:{i}",
                emotion=emotion,
                situation=f"My friend moved away last week (case {i}).",
                speaker_utterance="The house feels empty.",
            )
            for i in range(prompts)
        ]
    )
    provider = Provider.objects.create(
        name="replicas-loopback",
        base_url=loopback.url(0),
        api_key_env="BENCH_GENERATION_KEY",
        max_concurrency=8,
        requests_per_minute=6000,
        tokens_per_minute=10_000_000,
        timeout_seconds=10,
    )
    condition = Condition.objects.create(study=study, name="llm", kind=Condition.Kind.LLM)
    LLMConditionConfig.objects.create(
        condition=condition, provider=provider, model="bench-model", max_tokens=32
    )
    return study


def generation_check(study, prompts: int) -> dict:
    from django.db.models import Count

    from generation.models import GenerationItem
    from studies.models import Response

    per_slot = (
        Response.objects.filter(condition__study=study).values("prompt", "condition").annotate(n=Count("id"))
    )
    return {
        "slots": prompts,
        "generated": len(per_slot),
        "lost": prompts - len(per_slot),
        "doubled": sum(row["n"] - 1 for row in per_slot if row["n"] > 1),
        "failed_items": GenerationItem.objects.filter(condition__study=study, status="failed").count(),
        "items_by_status": dict(
            GenerationItem.objects.filter(condition__study=study)
            .values_list("status")
            .annotate(n=Count("id"))
        ),
    }


def answers_check(outcomes: dict[str, list]) -> dict:
    """Lost and doubled answers over the three kinds (this run's participants), and the balance: completed
    participants per condition each study enrols into, and the pairwise study's pages per condition pair."""
    from django.db.models import Count

    from kinds.pairwise.models import PairItem
    from studies.kinds import kind_of
    from studies.models import Participant, QuestionnaireAnswer, QuestionnaireRun, Study

    rating = outcomes_check(slug="demo", outcomes=outcomes["demo"], id_prefix="R")
    completed = Participant.objects.filter(
        status=Participant.Status.COMPLETED, is_preview=False, external_id__startswith="R"
    )
    unanswered_pairs = PairItem.objects.filter(participant__in=completed, answered_at__isnull=True).count()
    unfinished_runs = QuestionnaireRun.objects.filter(
        participant__in=completed, completed_at__isnull=True
    ).count()
    doubled = QuestionnaireAnswer.objects.values("run", "item_number").annotate(n=Count("id")).filter(n__gt=1)
    imbalance = {}
    for study in Study.objects.filter(slug__in=KINDS):
        enrolling = study.conditions.filter(enrolling=True).filter(kind_of(study).enrollable())
        sizes = dict(completed.filter(study=study).values_list("condition").annotate(n=Count("id")))
        counts = [sizes.get(pk, 0) for pk in enrolling.values_list("pk", flat=True)]
        imbalance[study.slug] = max(counts) - min(counts) if counts else 0
    pairs = Counter()
    regular = PairItem.objects.filter(participant__in=completed, known_answer__isnull=True)
    for left, right, n in (
        regular.values_list("left__condition_id", "right__condition_id").annotate(n=Count("id")).order_by()
    ):
        pairs[tuple(sorted((left, right)))] += n
    return {
        "answers_acknowledged_rating": rating["answers_acknowledged"],
        "answers_lost": rating["answers_lost"] + unanswered_pairs + unfinished_runs,
        "answers_doubled": rating["duplicates"] + doubled.count(),
        "condition_imbalance": imbalance,
        "condition_imbalance_max": max(imbalance.values()),
        "pairwise_pages_per_condition_pair": sorted(pairs.values()),
    }


def periodic_check(sends: dict[str, list[float]], seconds: float) -> dict:
    """Sends of one periodic task closer together than half its interval: the task ran twice."""
    from django.conf import settings

    twice, intervals = 0, {}
    for name, entry in settings.CELERY_BEAT_SCHEDULE.items():
        interval = float(entry["schedule"])
        times = sorted(sends.get(name, []))
        twice += sum(1 for a, b in zip(times, times[1:], strict=False) if b - a < interval / 2)
        intervals[name] = {
            "interval_s": interval,
            "sent": len(times),
            "intervals_run": round(seconds / interval, 1),
        }
    return {"run_twice": twice, "per_task": intervals}


def generation_settle(study, seconds: float) -> None:
    """Waits (at most `seconds`) until no generation item of `study` is pending or running."""
    from generation.models import GenerationItem

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not GenerationItem.objects.filter(
            condition__study=study, status__in=["pending", "running"]
        ).exists():
            return
        time.sleep(2)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--participants", type=int, default=500)
    parser.add_argument("--arrival-seconds", type=float, default=90.0)
    parser.add_argument("--think-ms", type=float, default=300.0)
    parser.add_argument("--prompts", type=int, default=60, help="LLM responses generated during the run")
    parser.add_argument("--kill-at", type=float, default=20.0, help="seconds into the arrivals: web 2 killed")
    parser.add_argument("--logs", type=Path, default=None, help="copy the processes' logs here at the end")
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/7"))
    parser.add_argument(
        "--settle-seconds", type=float, default=300.0, help="at most, for generation to finish"
    )
    parser.add_argument(
        "--beat-intervals",
        type=int,
        default=10,
        help="the run lasts until beat has run this many intervals of the shortest periodic task (60 s)",
    )
    args = parser.parse_args(argv)

    extra = {
        "GENERATION_QUEUE": GENERATION_QUEUE,
        "GENERATION_LEASE_SECONDS": "20",
        # The sweep (every 120 s) sends a never-attempted item again once its message is this old (900 s in
        # production): the item whose message the killed worker took along comes back within the run.
        "GENERATION_REDISPATCH_SECONDS": "60",
        "BENCH_GENERATION_KEY": "bench-key-not-secret",
        "PROVIDER_URL_ALLOWLIST": "127.0.0.0/8",
        # Each simulated participant's address in X-Forwarded-For, then nginx's append: two hops to trust.
        "RATELIMIT_TRUSTED_PROXIES": "2",
        "RATELIMIT_ENROLL_PER_STUDY": "100000",
    }
    loopback = Loopback(latency=1.0)
    with Stack(workers=2, redis_url=args.redis_url, name="replicas", extra_env=extra) as stack:
        stack.manage("seed_demo")
        for key, value in extra.items():
            os.environ[key] = value
        stack.django_setup()
        studies_prepare()
        generation = generation_prepare(loopback, args.prompts)
        procs = Processes(stack)
        proxy = None
        try:
            for index in range(3):
                procs.web_start(index)
            for index in range(3):
                procs.web_wait(index)
            # The template's `server ${NGINX_UPSTREAM} max_fails=0;`, once per web process.
            upstream = " max_fails=0; server ".join(f"127.0.0.1:{port}" for port in procs.ports)
            proxy = Proxy(upstream)
            proxy.start()
            for index in range(2):
                procs.worker_start(index)
            procs.beat_start()
            result = run(args, stack, procs, proxy, generation, time.time())
        finally:
            if proxy is not None:
                proxy.stop()
            procs.stop_all()
            if args.logs is not None:
                args.logs.mkdir(parents=True, exist_ok=True)
                for path in stack.var_dir.glob("*.log"):
                    shutil.copy(path, args.logs / path.name)
    print(json.dumps(result, indent=1))
    return result


class ConnectionSampler(threading.Thread):
    """The stack's PostgreSQL connections (web, workers, beat), counted every second: their peak and median."""

    def __init__(self, db_name: str) -> None:
        super().__init__(daemon=True)
        self.db_name, self.samples, self._done = db_name, [], threading.Event()

    def run(self) -> None:
        while not self._done.wait(1.0):
            count = _admin_sql(f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{self.db_name}'")
            self.samples.append(int(count))

    def stop(self) -> None:
        self._done.set()
        self.join()

    def figures(self) -> dict:
        ordered = sorted(self.samples) or [0]
        return {"peak": ordered[-1], "median": ordered[len(ordered) // 2], "samples": len(self.samples)}


def run(args, stack: Stack, procs: Processes, proxy: Proxy, generation, beat_started: float) -> dict:
    from django.conf import settings

    from generation.models import GenerationItem
    from generation.services.dispatch import generation_start
    from generation.services.prompts import generation_conditions

    recorder = Recorder()
    connections = ConnectionSampler(stack.db_name)
    connections.start()
    outcomes: dict[str, list] = {slug: [] for slug in KINDS}
    lock = threading.Lock()
    rng = random.Random(7)
    starts = sorted(rng.uniform(0, args.arrival_seconds) for _ in range(args.participants))
    marks: dict[str, float] = {}
    t0 = time.monotonic()
    wall0 = time.time()

    def one(i: int) -> None:
        slug = KINDS[i % len(KINDS)]
        time.sleep(max(0.0, t0 + starts[i] - time.monotonic()))
        external_id = f"R{i:04d}{rng.getrandbits(32):08x}"
        outcome = run_participant(
            base_url=proxy.base_url,
            entry_path=entry_path(slug, external_id),
            external_id=external_id,
            client_ip=f"10.9.{i // 256}.{i % 256}",
            recorder=recorder,
            think_seconds=args.think_ms / 1000,
            completion_marker=MARKER,
            rng=random.Random(i),
            retry_seconds=90,
        )
        with lock:
            outcomes[slug].append(outcome)

    def faults() -> None:
        time.sleep(5)
        log("generation started")
        generation_start(study=generation, conditions=generation_conditions(study=generation), via="bench")
        running, waited = 0, time.monotonic()
        while not running and time.monotonic() - waited < 30:  # mid-generation: once items are running
            time.sleep(0.5)
            running = GenerationItem.objects.filter(condition__study=generation, status="running").count()
        marks["worker_killed"] = time.monotonic() - t0
        marks["generation_items_running_at_kill"] = running
        log(f"killing worker 0 with {running} items running")
        procs.kill(procs.workers[0])
        time.sleep(max(0.0, t0 + args.kill_at - time.monotonic()))
        marks["web_killed"] = time.monotonic() - t0
        log("killing web 2")
        procs.kill(procs.web[2])
        time.sleep(3)
        log("a second beat, by mistake")
        procs.beat_start()
        marks["second_beat_started"] = time.monotonic() - t0
        time.sleep(7)
        procs.web_start(2)
        procs.web_wait(2)
        marks["web_back"] = time.monotonic() - t0
        log("web 2 is back; worker 0 restarted")
        procs.worker_start(0)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(args.participants)]
    fault_thread = threading.Thread(target=faults, daemon=True)
    fault_thread.start()
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        time.sleep(5)
        done = sum(len(v) for v in outcomes.values())
        log(f"{done}/{args.participants} participants finished, {recorder.requests} requests")
    fault_thread.join()
    participants_seconds = time.monotonic() - t0
    generation_settle(generation, args.settle_seconds)
    shortest = min(float(entry["schedule"]) for entry in settings.CELERY_BEAT_SCHEDULE.values())
    beat_until = beat_started + args.beat_intervals * shortest + 5
    if time.time() < beat_until:
        log(f"both beats running until {args.beat_intervals} intervals of {shortest:.0f} s have passed")
        time.sleep(beat_until - time.time())
    generation_settle(generation, args.settle_seconds)  # the killed worker's items come back by the sweep
    seconds = time.time() - wall0
    connections.stop()

    window = (marks["web_killed"], marks["web_back"] + 2)
    failed_during_kill = [
        e for e in recorder.events if window[0] <= e[0] - t0 <= window[1] and (e[3] == 0 or e[3] >= 500)
    ]
    statuses = Counter(e[3] for e in recorder.events)
    all_outcomes = [o for v in outcomes.values() for o in v]
    stuck = [o.error for o in all_outcomes if not o.completed]
    return {
        "benchmark": "replicas",
        "shape": "3 gunicorn (2 ASGI workers each) behind nginx round-robin, 2 Celery workers, beat, PostgreSQL, Redis",
        "participants": args.participants,
        "completed": {slug: sum(o.completed for o in v) for slug, v in outcomes.items()},
        "completed_all": len(all_outcomes) - len(stuck),
        "not_completed_reasons": Counter(s[:200] for s in stuck).most_common(5),
        "session_losses": sum(1 for s in stuck if "stuck" in s),
        "csrf_failures": statuses.get(403, 0),
        **answers_check(outcomes),
        "web_kill": {
            "killed_at_s": round(marks["web_killed"], 1),
            "back_at_s": round(marks["web_back"], 1),
            "requests_in_window": sum(1 for e in recorder.events if window[0] <= e[0] - t0 <= window[1]),
            "failed_requests": len(failed_during_kill),
            "failed_statuses": dict(Counter(e[3] for e in failed_during_kill)),
        },
        "worker_kill": {
            "killed_at_s": round(marks["worker_killed"], 1),
            "items_running_at_kill": marks["generation_items_running_at_kill"],
            **generation_check(generation, args.prompts),
        },
        "second_beat_started_at_s": round(marks["second_beat_started"], 1),
        "periodic_tasks": periodic_check(procs.sends(), time.time() - beat_started),
        "postgresql_connections": connections.figures(),
        "requests": recorder.requests,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "participants_seconds": round(participants_seconds, 1),
        "run_seconds": round(seconds, 1),
        "cpu_cores": os.cpu_count(),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
    }


if __name__ == "__main__":
    main()
