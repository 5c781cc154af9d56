"""Server CPU time over a phase of a benchmark, read from /proc: the gunicorn processes, the PostgreSQL backends
serving the benchmark's database, and the Redis server.

CPU time is utime + stime of each process (/proc/<pid>/stat, in clock ticks: 10 ms on Linux), polled every
half second during the run (see CpuMeter) and compared before and after the phase. Gunicorn: the master and
its workers. PostgreSQL: the backends whose `pg_stat_activity.datname` is the benchmark's database (they come
and go with DB_CONN_MAX_AGE; one that started during the phase counts from zero), not the shared background
processes (WAL writer, checkpointer). Redis: the one server process (from `INFO server`), which
other users of this machine's Redis share — so its figure is an upper bound, reported apart.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

TICK_SECONDS = 1 / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float | None:
    """utime + stime of one process, or None when it is gone or unreadable."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) ": state is field 3 of stat(5)
    return (int(fields[11]) + int(fields[12])) * TICK_SECONDS


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@dataclass
class CpuSample:
    gunicorn: dict[int, float]
    postgres: dict[int, float]
    redis: dict[int, float]


class CpuMeter:
    """`sample()` before and after a phase; `between(before, after)` is the CPU seconds each group used.

    A thread polls every `interval` seconds and remembers the last CPU time seen of every process of each
    group, those that have exited since included: gunicorn workers live for the whole run, but each worker
    closes its PostgreSQL connection once it is DB_CONN_MAX_AGE (60 s) old, so over a three-minute wave most
    backends come and go. What a backend used between the last poll and its exit is missed (under
    `interval` of its life)."""

    def __init__(
        self, *, gunicorn_pid: int, db_url: str, db_name: str, redis_url: str, interval: float = 0.5
    ):
        self.gunicorn_pid = gunicorn_pid
        self.db_url = db_url
        self.db_name = db_name
        self.redis_pid = _redis_pid(redis_url)
        self.interval = interval
        self._seen: dict[str, dict[int, float]] = {"gunicorn": {}, "postgres": {}, "redis": {}}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll_forever, daemon=True)
        self._thread.start()

    def _poll_forever(self) -> None:
        import psycopg2

        connection = psycopg2.connect(self.db_url)
        connection.autocommit = True
        try:
            while not self._stop.is_set():
                self._poll(connection)
                self._stop.wait(self.interval)
        finally:
            connection.close()

    def _poll(self, connection) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                [self.db_name],
            )
            postgres = [row[0] for row in cursor.fetchall()]
        groups = {
            "gunicorn": [self.gunicorn_pid, *_children(self.gunicorn_pid)],
            "postgres": postgres,
            "redis": [self.redis_pid] if self.redis_pid else [],
        }
        with self._lock:
            for group, pids in groups.items():
                for pid in pids:
                    seconds = process_cpu_seconds(pid)
                    if seconds is not None:
                        self._seen[group][pid] = seconds

    def sample(self) -> CpuSample:
        """The last CPU time seen of every process so far (polled once more now, so it is current)."""
        import psycopg2

        connection = psycopg2.connect(self.db_url)
        try:
            self._poll(connection)
        finally:
            connection.close()
        with self._lock:
            return CpuSample(**{group: dict(seen) for group, seen in self._seen.items()})

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)

    @staticmethod
    def between(before: CpuSample, after: CpuSample) -> dict[str, float]:
        def used(start: dict[int, float], end: dict[int, float]) -> float:
            return sum(seconds - start.get(pid, 0.0) for pid, seconds in end.items())

        return {
            "gunicorn": used(before.gunicorn, after.gunicorn),
            "postgres": used(before.postgres, after.postgres),
            "redis": used(before.redis, after.redis),
        }


def _redis_pid(redis_url: str) -> int | None:
    try:
        import redis

        pid = int(redis.Redis.from_url(redis_url, socket_timeout=2).info("server")["process_id"])
    except Exception:
        return None
    return pid if process_cpu_seconds(pid) is not None else None


def per_participant(used: dict[str, float], completed: int) -> dict:
    """CPU milliseconds per completed participant, per group and in all (gunicorn + PostgreSQL + Redis), and
    what that means for sizing: participants per minute that one fully used core serves."""
    if not completed:
        return {"participants_completed": 0}
    total = used["gunicorn"] + used["postgres"] + used["redis"]
    per = {name: round(seconds * 1000 / completed, 1) for name, seconds in used.items()}
    total_ms = total * 1000 / completed
    return {
        "participants_completed": completed,
        "cpu_seconds": {name: round(seconds, 2) for name, seconds in used.items()},
        "cpu_ms_per_participant": {**per, "total": round(total_ms, 1)},
        "participants_per_minute_per_core": round(60_000 / total_ms, 1) if total_ms else None,
    }


def cpu_total(server_cpu: dict | None) -> float | None:
    """The total CPU ms per participant of a `per_participant` report (None when nobody completed)."""
    return (server_cpu or {}).get("cpu_ms_per_participant", {}).get("total")


def cpu_ratio(new: float | None, old: float | None) -> float | None:
    return round(new / old, 3) if new and old else None


def cpu_compare(*, waves: dict[str, dict], saturation: dict[str, dict]) -> dict:
    """Server CPU per completed participant, in place over form posts, for each wave (`launch` / `launch_form`,
    `stress` / `stress_form`) and at saturation (`saturation["in_place"]`, `saturation["form"]`)."""
    out: dict = {
        "definition": (
            "server CPU ms per completed participant (gunicorn master + workers, the PostgreSQL backends of "
            "the benchmark's database, the Redis server; utime+stime from /proc over the phase, divided by "
            "the participants it completed), in place (one background POST per answer) over form posts "
            "(the no-JavaScript baseline), same run; participants_per_minute_per_core = 60,000 / that"
        )
    }
    for name in ("launch", "stress"):
        new = cpu_total(waves.get(name, {}).get("server_cpu"))
        old = cpu_total(waves.get(f"{name}_form", {}).get("server_cpu"))
        out[name] = {"in_place": new, "form": old}
        out[f"{name}_ratio"] = cpu_ratio(new, old)
    new, old = cpu_total(saturation["in_place"]), cpu_total(saturation["form"])
    out["saturation"] = {"in_place": new, "form": old}
    out["saturation_ratio"] = cpu_ratio(new, old)
    out["participants_per_minute_per_core"] = {
        mode: saturation[mode].get("participants_per_minute_per_core") for mode in ("in_place", "form")
    }
    return out
