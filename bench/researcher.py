"""What a researcher waits for: management commands, the admin and analysis pages they use most and the close
action, today's code beside a baseline revision, measured in one run.

    .venv/bin/python bench/researcher.py [--baseline 7941947] [--runs 5] [--requests 12] [--think 1]

Each revision (this checkout, and `--baseline` checked out in a temporary git worktree; '' for none) gets its own
SQLite database under a temporary VAR_DIR, migrated and seeded with the demo studies (`seed_demo`, as `make run`
does), then the data a researcher has mid-study: 30 ratings in `demo` (3 participants × 10, one answering too
fast), 300 votes in `pairs-demo` (30 participants × 10) and live copies of `demo` to close. Then, for each:

- `manage.py help` and `manage.py study_status demo`: wall time of the whole command (a fresh Python process:
  start-up, imports, checks, the work) and its CPU time (user + system: what it costs whatever else runs on the
  machine), `--runs` times each, alternating between the revisions so that load on the machine falls on both
  alike;
- the pages, in three rounds of a fresh process per revision, alternating, each process started as a server is
  (it imports the WSGI module: `server_start_ms`), signed in as the demo admin, through Django's test client
  (server-side time), `--think` seconds between two requests as a person reads: the admin's home (`--drafts`
  empty drafts beside the demo's), the study change, launch, quotas step, live status and participant list pages
  of `demo`, the analysis dashboard of `demo` with the declared exclusions and without ("No exclusions"), the
  `published-sample` dashboard and its report.html, the `pairs-demo` pairwise page, and the close action (its
  page, the POST, the page it lands on) on a fresh live study each time. The first request of each round is
  reported apart (`first_ms`, first round's; what a newly started server's first visitor waits); the others
  (`--requests` in all) give the median and p90. A dashboard also gets `ready_ms`, one per round: from its first
  request until its status says the analysis shown is current (what the researcher waits for the figures, with
  the page's progress indicator up meanwhile). Each page and the close action also get the CPU time of the thread
  that served them (`cpu_median_ms`, `cpu_p90_ms`: `time.thread_time`, so neither the background computes of
  `make run` nor other load on the machine count), what a request costs on a quiet machine.

Prints ONE JSON object: {"head": {...}, "baseline": {...}, "machine": {...}}, times in milliseconds.
Goals: commands under 1,500 ms (issue #40), every page under 1 s at the 90th percentile (issue #51).
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
DEFAULT_BASELINE = "7941947"
PAGE_ROUNDS = 3

#: Run inside a revision's tree (its own code on sys.path): starts as a server does (the WSGI module, timed as
#: `start_ms`), then times the admin and analysis pages and the researcher's actions, prints JSON. Each page: the
#: first request apart (`first_ms`), then the others. An analysis page whose result is computed ahead
#: (analysis/snapshots.py) also gets `ready_ms`: from its first request until its status says the result shown is
#: current (what a researcher waits for figures, with the page's progress indicator up meanwhile).
PAGES_SCRIPT = r"""
import json, os, sys, time
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
started = time.perf_counter()
import config.wsgi  # what a server imports before its first request
start_ms = (time.perf_counter() - started) * 1000
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from studies.models import Study

n = int(sys.argv[1])
think = float(sys.argv[2])  # seconds between pages, as a person reads (background computes go on meanwhile)
study = Study.objects.get(slug="demo")
client = Client()
client.force_login(get_user_model().objects.filter(is_superuser=True).first())
closable = list(Study.objects.filter(slug__startswith="close-", state="live").order_by("slug"))
pages = {
    "admin_home": "/admin/",
    "admin_study_change": f"/admin/studies/study/{study.pk}/change/",
    "admin_launch": f"/admin/studies/study/{study.pk}/state/launch/",
    "admin_setup_quotas": f"/admin/studies/study/{study.pk}/setup/quotas/",
    "admin_live_status": f"/admin/studies/study/{study.pk}/status/",
    "admin_participants": f"/admin/studies/participant/?study__id__exact={study.pk}",
    "analysis_demo": "/analysis/demo/",
    "analysis_demo_no_exclusions": "/analysis/demo/?exclusions=none",
    "analysis_published": "/analysis/published-sample/",
    "analysis_published_report": "/analysis/published-sample/report.html",
    "analysis_pairwise": "/analysis/pairs-demo/pairwise/",
}
status_of = {
    "analysis_demo": "/analysis/demo/status.json",
    "analysis_demo_no_exclusions": "/analysis/demo/status.json?exclusions=none",
    "analysis_published": "/analysis/published-sample/status.json",
}


def ready_ms(url, since):
    while time.perf_counter() - since < 300:
        answer = client.get(url)
        if answer.status_code != 200 or answer.json()["current"]:
            break
        time.sleep(0.1)
    return (time.perf_counter() - since) * 1000


out = {"start_ms": start_ms}
for name, url in pages.items():
    times, cpu = [], []
    for i in range(n + 1):
        with CaptureQueriesContext(connection) as queries:
            began, began_cpu = time.perf_counter(), time.thread_time()
            status = client.get(url).status_code
            times.append((time.perf_counter() - began) * 1000)
            cpu.append((time.thread_time() - began_cpu) * 1000)
        assert status == 200, (url, status)
        if i == 0 and name in status_of:
            out.setdefault("ready", {})[name] = ready_ms(status_of[name], began)
        time.sleep(think)
    out[name] = {
        "first_ms": times[0], "times_ms": times[1:], "cpu_ms": cpu[1:], "queries": len(queries.captured_queries)
    }
# Close: on its page, the button (the POST that closes a fresh live study, and the page it lands on).
times, cpu = [], []
for target in closable[: n + 1]:
    assert client.get(f"/admin/studies/study/{target.pk}/state/close/").status_code == 200
    began, began_cpu = time.perf_counter(), time.thread_time()
    answer = client.post(f"/admin/studies/study/{target.pk}/state/close/")
    assert answer.status_code == 302, answer.status_code
    assert client.get(answer["Location"]).status_code == 200
    times.append((time.perf_counter() - began) * 1000)
    cpu.append((time.thread_time() - began_cpu) * 1000)
    time.sleep(think)
out["action_close"] = {"first_ms": times[0], "times_ms": times[1:], "cpu_ms": cpu[1:], "queries": 0}
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


#: The demo's data as a researcher has it mid-study: 30 ratings in `demo` (3 participants × 10, one of them
#: answering too fast), 300 votes in `pairs-demo` (30 participants × 10), and live studies to close (argv[1]),
#: each a copy of `demo`'s settings with its own 3 participants. Only fields every measured revision has.
DATA_SCRIPT = r"""
import os, sys, random, datetime as dt
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.utils import timezone
from studies.models import Assignment, Participant, Response, Study
try:
    from kinds.pairwise.models import PairItem
    from kinds.rating.models import Rating
except ImportError:  # a baseline from before the kinds' own models
    from studies.models import PairItem, Rating

rng = random.Random(51)
now = timezone.now()


def rate(study, people, items, slow_ms=4000, fast_ms=600):
    conditions = list(study.conditions.order_by("position", "name"))
    for i in range(people):
        condition = conditions[i % len(conditions)]
        person = Participant.objects.create(study=study, condition=condition, external_id=f"bench-{study.slug}-{i}",
                                            status="completed", finished_at=now)
        responses = list(Response.objects.filter(condition=condition, sample_index=0).order_by("id")[:items])
        for position, response in enumerate(responses):
            page = Assignment.objects.create(participant=person, position=position, response=response)
            Rating.objects.create(assignment=page, value=rng.choice([1, 2, 3]),
                                  response_time_ms=fast_ms if i == 0 else slow_ms + rng.randint(0, 3000))


demo = Study.objects.get(slug="demo")
rate(demo, 3, 10)
pairs = Study.objects.get(slug="pairs-demo")
conditions = list(pairs.conditions.order_by("position", "name"))
by_prompt = {}
for response in Response.objects.filter(condition__study=pairs, sample_index=0):
    by_prompt.setdefault(response.prompt_id, {})[response.condition_id] = response
prompts = [p for p, replies in by_prompt.items() if len(replies) == len(conditions)]
for i in range(30):
    person = Participant.objects.create(study=pairs, condition=conditions[0], external_id=f"bench-pairs-{i}",
                                        status="completed", finished_at=now)
    for position, prompt in enumerate(rng.sample(prompts, 10)):
        left, right = rng.sample(conditions, 2)
        PairItem.objects.create(participant=person, position=position, prompt_id=prompt,
                                left=by_prompt[prompt][left.pk], right=by_prompt[prompt][right.pk],
                                shown_at=now, answered_at=now + dt.timedelta(seconds=position),
                                choice=rng.choice(["left", "right", "tie"]), response_time_ms=rng.randint(2000, 9000))
for i in range(int(sys.argv[1])):
    copy = Study.objects.get(slug="demo")
    originals = list(copy.conditions.all())
    copy.pk, copy.id, copy.slug, copy.state = None, None, f"close-{i:02d}", "live"
    copy.save()
    copied = {}
    for condition in originals:
        responses = list(condition.responses.filter(sample_index=0).order_by("prompt_id")[:10])
        condition.pk, condition.id, condition.study = None, None, copy
        condition.save()
        for response in responses:
            prompt = copied.get(response.prompt_id)
            if prompt is None:
                prompt = copied[response.prompt_id] = response.prompt
                prompt.pk, prompt.id, prompt.study = None, None, copy
                prompt.save()
            response.pk, response.id, response.prompt, response.condition = None, None, prompt, condition
            response.save()
    rate(copy, 3, 5)
"""


def prepare(tree: Path, var_dir: Path, drafts: int, closes: int) -> dict:
    env = env_for(var_dir)
    run(tree, env, "manage.py", "migrate", "--noinput")
    run(tree, env, "manage.py", "seed_demo")
    run(tree, env, "-c", DRAFTS_SCRIPT, str(drafts))
    run(tree, env, "-c", DATA_SCRIPT, str(closes))
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
    out = {
        "first_ms": seen["first_ms"],
        "median_ms": round(statistics.median(times), 1),
        "p90_ms": round(times[min(len(times) - 1, int(0.9 * len(times)))], 1),
        "requests": len(times),
        "queries": seen["queries"],
    }
    if seen.get(
        "cpu"
    ):  # the request's own thread: what it costs whatever the background computes and the load
        cpu = sorted(seen["cpu"])
        out["cpu_median_ms"] = round(statistics.median(cpu), 1)
        out["cpu_p90_ms"] = round(cpu[min(len(cpu) - 1, int(0.9 * len(cpu)))], 1)
    if seen.get("ready"):
        out["ready_ms"] = [round(ms) for ms in seen["ready"]]  # one a round: a fresh process each
    return out


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
    parser.add_argument(
        "--think", type=float, default=1.0, help="Seconds between two pages, as a person reads them."
    )
    args = parser.parse_args(argv)
    per_round = max(args.requests // PAGE_ROUNDS, 1)

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
            envs[name] = prepare(tree, scratch / f"var-{name}", args.drafts, PAGE_ROUNDS * (per_round + 1))
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
        starts: dict[str, list[float]] = {name: [] for name in trees}
        readies: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
        for round_number in range(PAGE_ROUNDS):
            for name, tree in trees.items():
                log(f"{name}: admin pages, round {round_number + 1} of {PAGE_ROUNDS}")
                done = run(tree, envs[name], "-c", PAGES_SCRIPT, str(per_round), str(args.think))
                measured = json.loads(done.stdout.strip().splitlines()[-1])
                starts[name].append(measured.pop("start_ms"))
                for page, ready in measured.pop("ready", {}).items():
                    readies[name].setdefault(page, []).append(ready)
                for page, figures in measured.items():
                    seen = pages[name].setdefault(
                        page,
                        {
                            "first_ms": round(figures["first_ms"], 1),
                            "times": [],
                            "cpu": [],
                            "queries": figures["queries"],
                        },
                    )
                    seen["times"] += figures["times_ms"]
                    seen["cpu"] += figures.get("cpu_ms", [])
        result: dict = {}
        for name, tree in trees.items():
            result[name] = {
                "revision": subprocess.run(
                    ["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True
                ).stdout.strip(),
                "commands": {c: summary(samples[name][c]) for c in commands},
                "server_start_ms": [round(ms) for ms in starts[name]],
                "pages": {
                    page: page_summary({**seen, "ready": readies[name].get(page)})
                    for page, seen in pages[name].items()
                },
            }
        result["machine"] = {"cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]}
        result["goals_ms"] = {"commands": 1500, "admin_pages": 300, "every_page_p90": 1000}
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
