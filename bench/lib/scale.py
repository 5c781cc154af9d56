"""Costs as a rating study grows (bench/participants.py --scale): for each size, a study of that many completed
participants (10 ratings each, generated inside PostgreSQL by bench/analysis.py `generate`), then:

* enrolment: `--scale-enrolments` newcomers one after another (`participant_enroll`, in process): latency
  percentiles and CPU per enrolment (this process's plus its PostgreSQL backend's, from /proc);
* at the largest size only: the study's live status page (the admin's; and apart, its counts and its list of
  participants the declared rules flag, at the first look after the bulk load and after 100 participants
  changed), the analysis dashboard's first view with the analysis computed ahead (bench/analysis.py
  `measure_dashboard`), and the ratings, participants and responses exports streamed through the view (Django's
  test client, the whole middleware stack): time, CPU, size and the process's memory sampled while it streams.
  Wall time and CPU (this process's plus its PostgreSQL backend's) are reported side by side: the machine may be
  shared.

Each size runs in a child process on a database of its own (dropped after), so sizes do not share caches. With a
baseline revision (a temporary git worktree), the same enrolment measure runs on that code too, in the same run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PG = "postgres://postgres@127.0.0.1:5432"


def _percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {
        "p50_ms": round(pick(0.5) * 1000, 2),
        "p95_ms": round(pick(0.95) * 1000, 2),
        "p99_ms": round(pick(0.99) * 1000, 2),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
    }


def _backend_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a PostgreSQL backend on this machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def child(size: int, db: str, enrolments: int, views: bool) -> dict:
    """In a fresh process whose sys.path starts with the revision's checkout."""
    from bench.analysis import admin_sql, django_setup, generate

    admin_sql(f'DROP DATABASE IF EXISTS "{db}"')
    admin_sql(f'CREATE DATABASE "{db}"')
    django_setup(db)
    from django.core.management import call_command
    from django.db import connection

    from studies.models import Study
    from studies.participants import participant_enroll

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    study = generate(size * 10)
    Study.objects.filter(pk=study.pk).update(state=Study.State.LIVE, quota_per_condition=10**7)
    try:
        from studies.balance_counts import counts_rebuild
    except ImportError:  # a revision without running totals
        counts_rebuild = None
    if counts_rebuild is not None:
        counts_rebuild(study)
    study.refresh_from_db()
    result = {
        "participants": size,
        "ratings": size * 10,
        "generated_seconds": round(time.perf_counter() - started, 1),
    }
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (backend,) = cursor.fetchone()
    for i in range(5):  # warm: the first enrolments compile and cache
        participant_enroll(study=study, external_id=f"warm-{i}")
    latencies, cpu = [], []
    for i in range(enrolments):
        cpu0, t0 = time.process_time() + _backend_cpu(backend), time.perf_counter()
        participant_enroll(study=study, external_id=f"new-{i}")
        latencies.append(time.perf_counter() - t0)
        cpu.append(time.process_time() + _backend_cpu(backend) - cpu0)
    result["enrolment"] = {
        **_percentiles(latencies),
        "cpu_ms_per_enrolment": round(statistics.fmean(cpu) * 1000, 2),
        "n": enrolments,
    }
    result["enrolment_statements"] = _statements(
        lambda: participant_enroll(study=study, external_id="explained")
    )
    if views:
        result.update(_views(study, backend))
    connection.close()
    admin_sql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    return result


def _seq_scans(node: dict) -> list[str]:
    own = (
        [f"{node.get('Relation Name')} ({node.get('Plan Rows')} rows)"]
        if node.get("Node Type") == "Seq Scan"
        else []
    )
    return own + [scan for child in node.get("Plans", []) for scan in _seq_scans(child)]


def _statements(fn) -> list[dict]:
    """The statements fn() makes, each with its time and PostgreSQL's plan (EXPLAIN, not run again): its total
    cost, the rows it expects, and the tables it reads whole (a cost that grows with the study)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        fn()
    out = []
    for query in captured.captured_queries:
        sql = query["sql"]
        entry = {"sql": sql[:160], "ms": round(float(query["time"]) * 1000, 2)}
        if sql.lstrip().upper().startswith(("SELECT", "INSERT", "UPDATE", "DELETE", "WITH")):
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
                plan = cursor.fetchone()[0][0]["Plan"]
            scans = _seq_scans(plan)
            entry.update(cost=plan.get("Total Cost"), rows=plan.get("Plan Rows"), seq_scans=scans)
        out.append(entry)
    return out


def _measured(fn, backend: int) -> tuple[object, dict]:
    """fn()'s result, and its wall time and CPU (this process's plus its PostgreSQL backend's) in seconds."""
    cpu0, t0 = time.process_time() + _backend_cpu(backend), time.perf_counter()
    result = fn()
    return result, {
        "seconds": round(time.perf_counter() - t0, 3),
        "cpu_seconds": round(time.process_time() + _backend_cpu(backend) - cpu0, 3),
    }


def _streamed(client, url: str, backend: int) -> dict:
    """One streamed export through the view: its time, first byte, rows, size, CPU, and the process's memory
    (VmRSS sampled every 20 ms while it streams: before, peak, after)."""
    import threading

    before = _rss_mb()
    peak = [before]
    streaming = threading.Event()
    streaming.set()

    def sample():
        while streaming.is_set():
            peak[0] = max(peak[0], _rss_mb())
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cpu0, t0 = time.process_time() + _backend_cpu(backend), time.perf_counter()
    response = client.get(url)
    assert response.status_code == 200 and response.streaming, (url, response.status_code)
    first_byte = time.perf_counter() - t0
    size = rows = 0
    for piece in response.streaming_content:
        size += len(piece)
        rows += piece.count(b"\n")
    seconds = time.perf_counter() - t0
    cpu = time.process_time() + _backend_cpu(backend) - cpu0
    streaming.clear()
    sampler.join()
    return {
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "first_byte_seconds": round(first_byte, 3),
        "rows": rows - 1,
        "mb": round(size / 1e6, 1),
        "rss_before_mb": round(before, 1),
        "rss_peak_while_streaming_mb": round(peak[0], 1),
        "rss_after_mb": round(_rss_mb(), 1),
        "streamed": True,
    }


def _export_file(client, study, backend: int) -> dict:
    """The ratings export of a large study as its page has it: the page redirected to, the file written as the
    worker writes it (`export_file_write`, in this process), and its download through the view."""
    from analysis import export_files

    export_files._dispatch = lambda file_id: None  # the worker's part is measured below, in this process
    link = client.get(f"/analysis/{study.slug}/exports/ratings.csv")
    assert link.status_code == 302, link.status_code
    (page, ask) = _measured(lambda: client.post(link["Location"]), backend)
    assert page.status_code == 302, page.status_code
    from analysis.models import ExportFile

    pending = ExportFile.objects.get(study=study, what="ratings", state__in=export_files.IN_PROGRESS)
    file, write = _measured(lambda: export_files.export_file_write(pending.pk), backend)
    download = _streamed(client, f"/analysis/{study.slug}/export-files/{file.pk}.csv", backend)
    return {
        "request": ask,
        "worker_write": {**write, "rows": file.rows, "mb": round(file.size / 1e6, 1)},
        "download": download,
    }


def _views(study, backend: int) -> dict:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from bench.analysis import measure_dashboard

    user, _ = get_user_model().objects.get_or_create(
        username="bench-analyst", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    client.get("/analysis/")
    from studies.selectors import study_flagged_participants, study_status

    try:  # a revision with stored flags and tallies: what the bulk load left for the first look to compute
        from studies.models import FlagsStale, StatusDelta

        pending = {
            "flags_stale": FlagsStale.objects.filter(study_id=study.pk).count(),
            "status_deltas": StatusDelta.objects.filter(study_id=study.pk).count(),
        }
    except ImportError:
        pending = {}
    out = {"status_page_parts": {"pending_after_bulk_load": pending}}
    parts = out["status_page_parts"]
    # The first look after the bulk load (once: every generated participant is new to the page).
    _, parts["flagged_list_first_look"] = _measured(lambda: study_flagged_participants(study=study), backend)
    _, parts["counts_first_look"] = _measured(lambda: study_status(study=study), backend)
    page, timing = _measured(lambda: client.get(f"/admin/studies/study/{study.pk}/status/"), backend)
    assert page.status_code == 200, page.status_code
    out["status_page"] = timing
    out["status_page_seconds"] = timing["seconds"]
    # A later look, after 100 participants changed: their ratings' times and their status.
    from kinds.rating.models import Rating
    from studies.models import Participant

    changed = list(
        Participant.objects.filter(study=study, is_preview=False)
        .order_by("pk")
        .values_list("pk", flat=True)[:100]
    )
    Rating.objects.filter(assignment__participant_id__in=changed).update(response_time_ms=150)
    Participant.objects.filter(pk__in=changed[:50]).update(status=Participant.Status.RETURNED)
    _, parts["flagged_list_after_100_changed"] = _measured(
        lambda: study_flagged_participants(study=study), backend
    )
    _, parts["counts_after_100_changed"] = _measured(lambda: study_status(study=study), backend)
    page, timing = _measured(lambda: client.get(f"/admin/studies/study/{study.pk}/status/"), backend)
    out["status_page_after_100_changed"] = timing
    from django.conf import settings

    as_file = getattr(settings, "EXPORT_FILE_ABOVE_PARTICIPANTS", None)
    settings.EXPORT_FILE_ABOVE_PARTICIPANTS = 10**9  # the stream, as the API serves it at any size
    out["export"] = _streamed(client, f"/analysis/{study.slug}/exports/ratings.csv", backend)
    out["export_participants"] = _streamed(
        client, f"/analysis/{study.slug}/exports/participants.csv", backend
    )
    out["export_responses"] = _streamed(client, f"/analysis/{study.slug}/exports/responses.csv", backend)
    if as_file is not None:  # a revision with export files: the worker's file, then its download
        settings.EXPORT_FILE_ABOVE_PARTICIPANTS = 0  # the file's path, whatever the size measured
        out["export_file"] = _export_file(client, study, backend)
    out["dashboard"] = measure_dashboard(study)
    return out


def run(sizes: list[int], *, root: Path, enrolments: int, views_at_largest: bool, label: str) -> list[dict]:
    """Each size in a child process serving `root`'s code."""
    results = []
    for size in sizes:
        views = views_at_largest and size == max(sizes)
        db = f"empathy_scale_{label}_{size}_{os.getpid()}"
        print(
            f"[bench scale {time.strftime('%H:%M:%S')}] {label}: {size} participants",
            file=sys.stderr,
            flush=True,
        )
        argv = [str(root), str(size), db, str(enrolments), "1" if views else ""]
        env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL", "DJANGO_ENV"}}
        env["DJANGO_ENV"] = "test"
        done = subprocess.run(
            [sys.executable, __file__, *argv], cwd=root, env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"scale child {label} {size} failed:\n{done.stderr[-4000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


@contextlib.contextmanager
def worktree(ref: str):
    """A temporary git worktree of revision `ref` of this repository."""
    base = Path(__file__).resolve().parents[2]
    tree = Path(tempfile.mkdtemp(prefix="empathy-scale-")) / "tree"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(tree), ref], cwd=base, check=True, capture_output=True
    )
    try:
        yield tree
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=base, capture_output=True)
        shutil.rmtree(tree.parent, ignore_errors=True)


def report(sizes: list[int], current: list[dict], baseline: list[dict] | None, baseline_rev: str) -> dict:
    def growth(results):
        first, last = results[0]["enrolment"], results[-1]["enrolment"]
        return {
            "p99": round(last["p99_ms"] / first["p99_ms"], 2),
            "cpu": round(last["cpu_ms_per_enrolment"] / first["cpu_ms_per_enrolment"], 2),
        }

    out = {
        "sizes": sizes,
        "current": current,
        "must_show": {
            "enrolment_p99_ms": {r["participants"]: r["enrolment"]["p99_ms"] for r in current},
            "enrolment_cpu_ms": {r["participants"]: r["enrolment"]["cpu_ms_per_enrolment"] for r in current},
            f"growth_{max(sizes)}_over_{min(sizes)}": growth(current),
            "goal": "growth within 1.5x",
        },
    }
    largest = current[-1]
    for key in (
        "status_page",
        "status_page_after_100_changed",
        "status_page_parts",
        "export",
        "export_participants",
        "export_responses",
        "export_file",
        "dashboard",
    ):
        if key in largest:
            out["must_show"][key] = largest[key]
    if baseline:
        out["baseline"] = {"revision": baseline_rev, "results": baseline}
        out["must_show"][f"baseline_growth_{max(sizes)}_over_{min(sizes)}"] = growth(baseline)
        out["must_show"]["baseline_enrolment_p99_ms"] = {
            r["participants"]: r["enrolment"]["p99_ms"] for r in baseline
        }
    return out


if __name__ == "__main__":  # a child: python bench/lib/scale.py ROOT SIZE DB ENROLMENTS VIEWS
    root, size, db, enrolments, views = sys.argv[1:6]
    sys.path[0] = root  # the revision measured: its studies/, its bench/analysis.py
    print(json.dumps(child(int(size), db, int(enrolments), bool(views))))
