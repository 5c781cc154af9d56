"""What a researcher waits for: management commands and the admin pages they use most, today's code beside a
baseline revision, measured in one run.

    .venv/bin/python bench/researcher.py [--baseline 06906f7] [--runs 5] [--requests 12]

Each revision (this checkout, and `--baseline` checked out in a temporary git worktree; '' for none) gets its own
SQLite database under a temporary VAR_DIR, migrated and seeded with the demo studies (`seed_demo`, as `make run`
does). Then, for each:

- `manage.py help` and `manage.py study_status demo`: wall time of the whole command (a fresh Python process:
  start-up, imports, checks, the work) and its CPU time (user + system: what it costs whatever else runs on the
  machine), `--runs` times each, alternating between the revisions so that load on the machine falls on both
  alike;
- the admin's home (`/admin/`: the studies with what each draft still misses; `--drafts` empty drafts, 40 by
  default, are added beside the demo's), the admin study change page and the launch page of the demo study
  (`/admin/studies/study/<pk>/change/`, `/admin/studies/study/<pk>/state/launch/`): server-side response time through Django's test client, signed in
  as the demo admin, in three rounds of a fresh process per revision, alternating. The first request of the first
  round is reported apart (`first_ms`: what a newly started server's first visitor waits, imports included); the
  other requests after each process's first (`--requests` in all) give the median and p90.

Prints ONE JSON object: {"head": {...}, "baseline": {...}, "machine": {...}}, times in milliseconds.
Goals (issue #40): commands under 1,500 ms, each page under 300 ms, on the development machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = str(ROOT / ".venv" / "bin" / "python")
DEFAULT_BASELINE = "06906f7"
PAGE_ROUNDS = 3

#: Run inside a revision's tree (its own code on sys.path): times the two admin pages, prints JSON.
PAGES_SCRIPT = r"""
import json, os, sys, time
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from studies.models import Study

n = int(sys.argv[1])
study = Study.objects.get(slug="demo")
client = Client()
client.force_login(get_user_model().objects.filter(is_superuser=True).first())
pages = {
    "admin_home": "/admin/",
    "admin_study_change": f"/admin/studies/study/{study.pk}/change/",
    "admin_launch": f"/admin/studies/study/{study.pk}/state/launch/",
}
out = {}
for name, url in pages.items():
    times = []
    for i in range(n + 1):
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            status = client.get(url).status_code
            times.append((time.perf_counter() - started) * 1000)
        assert status == 200, (url, status)
    out[name] = {"first_ms": times[0], "times_ms": times[1:], "queries": len(queries.captured_queries)}
print(json.dumps(out))
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def env_for(var_dir: Path) -> dict:
    """A local run's environment (SQLite under var_dir, tasks in process), as `make run` has it."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_ENV", "CI"}}
    env.update({"VAR_DIR": str(var_dir), "DJANGO_ENV": "local"})
    return env


def run(tree: Path, env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, *args], cwd=tree, env=env, capture_output=True, text=True, check=check)


#: Adds N empty draft studies (argv[1]) beside the demo's: the home page lists each with what it still misses.
DRAFTS_SCRIPT = r"""
import os, sys
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from studies.models import Study
for i in range(int(sys.argv[1])):
    Study.objects.create(slug=f"draft-{i:03d}", title=f"Draft study {i}")
"""


def prepare(tree: Path, var_dir: Path, drafts: int) -> dict:
    env = env_for(var_dir)
    run(tree, env, "manage.py", "migrate", "--noinput")
    run(tree, env, "manage.py", "seed_demo")
    run(tree, env, "-c", DRAFTS_SCRIPT, str(drafts))
    run(tree, env, "manage.py", "help")  # compiled bytecode and the first-run caches, not counted
    return env


def command_ms(tree: Path, env: dict, *args: str) -> tuple[float, float]:
    """(wall, CPU) milliseconds of one command: the CPU (user + system of the process) is what the command
    costs whatever else runs on the machine; the wall time is what the researcher waits."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    run(tree, env, "manage.py", *args)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def summary(samples: list[tuple[float, float]]) -> dict:
    walls = sorted(wall for wall, _ in samples)
    return {
        "median_ms": round(statistics.median(walls), 1),
        "min_ms": round(walls[0], 1),
        "max_ms": round(walls[-1], 1),
        "cpu_median_ms": round(statistics.median(cpu for _, cpu in samples), 1),
        "runs": len(walls),
    }


def page_summary(seen: dict) -> dict:
    times = sorted(seen["times"])
    return {
        "first_ms": seen["first_ms"],
        "median_ms": round(statistics.median(times), 1),
        "p90_ms": round(times[min(len(times) - 1, int(0.9 * len(times)))], 1),
        "requests": len(times),
        "queries": seen["queries"],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--baseline", default=DEFAULT_BASELINE, help="Revision to compare with ('' for none)."
    )
    parser.add_argument("--runs", type=int, default=5, help="Runs of each command per revision.")
    parser.add_argument("--requests", type=int, default=12, help="Requests per page after the first.")
    parser.add_argument(
        "--drafts", type=int, default=40, help="Empty draft studies added beside the demo's (the home page)."
    )
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="empathy-researcher-"))
    trees = {"head": ROOT}
    baseline_tree = None
    try:
        if args.baseline:
            baseline_tree = scratch / "baseline"
            subprocess.run(
                ["git", "worktree", "add", "--detach", str(baseline_tree), args.baseline],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            trees["baseline"] = baseline_tree
        envs = {}
        for name, tree in trees.items():
            log(f"{name}: migrating and seeding the demo in {tree}")
            envs[name] = prepare(tree, scratch / f"var-{name}", args.drafts)
        commands = {"help": ("help",), "study_status_demo": ("study_status", "demo")}
        samples: dict[str, dict[str, list[tuple[float, float]]]] = {
            name: {c: [] for c in commands} for name in trees
        }
        for _ in range(args.runs):
            for command, command_args in commands.items():
                for name, tree in trees.items():  # alternating: load on the machine falls on both
                    samples[name][command].append(command_ms(tree, envs[name], *command_args))
        # The pages in rounds, alternating between the revisions (a fresh process each round), so that load on
        # the machine falls on both alike; the first request of the first round is the cold start.
        pages: dict[str, dict[str, dict]] = {name: {} for name in trees}
        for round_number in range(PAGE_ROUNDS):
            for name, tree in trees.items():
                log(f"{name}: admin pages, round {round_number + 1} of {PAGE_ROUNDS}")
                done = run(tree, envs[name], "-c", PAGES_SCRIPT, str(max(args.requests // PAGE_ROUNDS, 1)))
                for page, figures in json.loads(done.stdout.strip().splitlines()[-1]).items():
                    seen = pages[name].setdefault(
                        page,
                        {
                            "first_ms": round(figures["first_ms"], 1),
                            "times": [],
                            "queries": figures["queries"],
                        },
                    )
                    seen["times"] += figures["times_ms"]
        result: dict = {}
        for name, tree in trees.items():
            result[name] = {
                "revision": subprocess.run(
                    ["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True
                ).stdout.strip(),
                "commands": {c: summary(samples[name][c]) for c in commands},
                "pages": {page: page_summary(seen) for page, seen in pages[name].items()},
            }
        result["machine"] = {"cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]}
        result["goals_ms"] = {"commands": 1500, "pages": 300}
        result["drafts"] = args.drafts
        print(json.dumps(result))
        return result
    finally:
        if baseline_tree is not None:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(baseline_tree)], cwd=ROOT, capture_output=True
            )
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
