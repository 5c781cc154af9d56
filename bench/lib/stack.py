"""The production shape on this machine, for one benchmark run, torn down afterwards.

A PostgreSQL database of its own (created, migrated, seeded with a live rating study), gunicorn with several
sync workers under DJANGO_ENV=production (generated SECRET_KEY, whitenoise serving the collected static
files from a temporary VAR_DIR), Redis for the cache / rate limiter / broker (its own database number, emptied
at the start, so one run's rate-limit counters do not refuse the next one's clients). Nothing is left behind:
`Stack.stop()` kills gunicorn, drops the database and removes the temporary directory. PostgreSQL runs with
autovacuum on, as production's does (see `_autovacuum_hold`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from .cpu import CpuMeter

BASE_DIR = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
DEFAULT_CORPUS = BASE_DIR.parent / "shared" / "data" / "llm-empathy-evaluation" / "dataset_and_ratings.csv"
# The web application as production runs it (docker-compose, the Dockerfile, the Helm chart): ASGI in uvicorn workers.
WEB_APP = ["config.asgi", "--worker-class", "uvicorn_worker.UvicornWorker"]
ADMIN_DB_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port(exclude: tuple[int, ...] = ()) -> int:
    """A free port: the first free one of BENCH_PORTS ("8450-8499") when set (a machine shared by several
    people, each with their range), else any the system gives. `exclude`: ports already handed out to processes
    not listening yet."""
    low, _, high = os.environ.get("BENCH_PORTS", "0").partition("-")
    for port in [p for p in range(int(low), int(high or low) + 1) if p not in exclude] if int(low) else [0]:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise RuntimeError(f"no free port in BENCH_PORTS={os.environ['BENCH_PORTS']}")


def _admin_sql(sql: str):
    """Runs `sql` on the server's `postgres` database, outside a transaction; the first column of its first
    row, if it returns rows."""
    import psycopg2

    connection = psycopg2.connect(f"{ADMIN_DB_URL}/postgres")
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchone()[0] if cursor.description else None
    finally:
        connection.close()


# How many running stacks of this process turned the server's autovacuum on (see `_autovacuum_hold`).
_AUTOVACUUM_HOLDERS = 0


def _autovacuum_hold() -> bool:
    """Production's PostgreSQL vacuums as it goes: autovacuum is on by default, as in docker-compose's
    `postgres:16`. A server with it off lets every update's dead row versions pile up, so a benchmark's costs
    grow over its run: on such a server the entry's PostgreSQL CPU went from 2.1 to 4.4 ms over 3,000
    participants, and stayed at 1.9-2.2 ms when the tables were vacuumed between rounds. So a stack turns it
    on for its run (ALTER SYSTEM, then a reload) and the last stack to stop restores the server's own setting.
    `BENCH_AUTOVACUUM=server` leaves the server as it is. True when this stack turned it on."""
    global _AUTOVACUUM_HOLDERS
    if os.environ.get("BENCH_AUTOVACUUM") == "server":
        return False
    if _AUTOVACUUM_HOLDERS == 0:
        if postgres_autovacuum() == "on":
            return False
        log("PostgreSQL's autovacuum is off on this server: on for this run, as in production")
        _admin_sql("ALTER SYSTEM SET autovacuum = on")
        _admin_sql("SELECT pg_reload_conf()")
    _AUTOVACUUM_HOLDERS += 1
    return True


def _autovacuum_release() -> None:
    global _AUTOVACUUM_HOLDERS
    _AUTOVACUUM_HOLDERS -= 1
    if _AUTOVACUUM_HOLDERS == 0:
        log("PostgreSQL's autovacuum: back to the server's own setting")
        _admin_sql("ALTER SYSTEM RESET autovacuum")
        _admin_sql("SELECT pg_reload_conf()")


def postgres_autovacuum() -> str:
    """The server's autovacuum setting as the benchmark runs with it ("on" or "off"), for the reports."""
    return _admin_sql("SHOW autovacuum")


class Stack:
    """One throwaway deployment. Use as a context manager; `env` is what every process of it sees."""

    def __init__(
        self,
        *,
        workers: int = 4,
        redis_url: str = "redis://127.0.0.1:6379/6",
        extra_env: dict[str, str] | None = None,
        name: str = "bench",
        root: Path = BASE_DIR,
    ) -> None:
        self.root = root  # the checkout the stack runs (bench/participants.py --baseline: an older one)
        self.workers = workers
        self.db_name = f"empathy_{name}_{os.getpid()}"
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.var_dir = Path(tempfile.mkdtemp(prefix=f"empathy-{name}-"))
        self.gunicorn: subprocess.Popen | None = None
        self.log_path = self.var_dir / "server.log"
        self.env = {
            **{k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR"}},
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DJANGO_ENV": "production",
            "SECRET_KEY": secrets.token_urlsafe(64),
            "SECURE_SSL_REDIRECT": "0",
            "ALLOWED_HOSTS": "127.0.0.1",
            "DATABASE_URL": f"{ADMIN_DB_URL}/{self.db_name}",
            "REDIS_URL": redis_url,
            "VAR_DIR": str(self.var_dir),
            "BENCH_FLOOR_ENABLED": "1",
            "LOG_LEVEL": "INFO",
            # Every simulated participant comes from 127.0.0.1: they send X-Forwarded-For as a proxy in
            # front of the app would, so the per-IP entry limit applies per simulated client, as in production.
            "RATELIMIT_TRUSTED_PROXIES": "1",
            **(extra_env or {}),
        }
        self._db_created = False
        self._autovacuum_held = False

    # --- lifecycle ---------------------------------------------------------------------------------------
    def __enter__(self) -> Stack:
        try:
            self.prepare()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def manage(self, *args: str, timeout: float = 600) -> str:
        done = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def prepare(self) -> None:
        # The Redis database is the stack's own (`redis_url`): counters an earlier run left there (rate limits
        # keyed by the same study id and simulated addresses, for an hour) would refuse this run's clients.
        import redis

        redis.Redis.from_url(self.env["REDIS_URL"]).flushdb()
        self._autovacuum_held = _autovacuum_hold()
        log(f"creating database {self.db_name}")
        _admin_sql(f'CREATE DATABASE "{self.db_name}"')
        self._db_created = True
        log("migrate + collectstatic")
        self.manage("migrate", "--noinput")
        self.manage("collectstatic", "--noinput")
        self.manage("check", "--deploy", "--fail-level", "ERROR")

    def django_setup(self) -> None:
        """Points this process's Django at the stack's database (for seeding and checking results)."""
        for key in ("DJANGO_ENV", "SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL", "VAR_DIR"):
            os.environ[key] = self.env[key]
        os.environ["LOG_LEVEL"] = "WARNING"
        os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
        os.environ["DB_CONN_MAX_AGE"] = "0"
        if str(BASE_DIR) not in sys.path:
            sys.path.insert(0, str(BASE_DIR))
        import django

        django.setup()

    def cpu_meter(self) -> CpuMeter:
        """A `bench.lib.cpu.CpuMeter` of this stack's server: its gunicorn, its database's PostgreSQL
        backends, its Redis (call after `start_server`)."""
        return CpuMeter(
            gunicorn_pid=self.gunicorn.pid,
            db_url=self.env["DATABASE_URL"],
            db_name=self.db_name,
            redis_url=self.env["REDIS_URL"],
        )

    def start_server(self, *extra_args: str, asgi: bool = False) -> None:
        """gunicorn; `extra_args` are added to its command line (e.g. a `--config` file with hooks, as
        bench/profile_participants.py uses). `asgi`: as docker-compose runs it (config/asgi.py in uvicorn
        workers); else the WSGI application in sync workers."""
        log(f"gunicorn with {self.workers} {'ASGI' if asgi else 'sync'} workers on {self.base_url}")
        app = WEB_APP if asgi else ["config.wsgi"]
        self.gunicorn = subprocess.Popen(
            [
                str(Path(PYTHON).parent / "gunicorn"),
                *app,
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(self.workers),
                "--timeout",
                "30",
                "--graceful-timeout",
                "5",
                "--backlog",
                "2048",
                # Django is set up once in the master; a worker replacing a killed one starts warm.
                "--preload",
                *extra_args,
            ],
            cwd=self.root,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.log_path, "ab"),  # noqa: SIM115 - closed with the process
            start_new_session=True,
        )
        self.wait_healthy()
        self.warm_up()

    def warm_up(self, timeout: float = 180) -> None:
        """Each worker loads the URLconf (and the analysis stack it imports) on its first request, which
        takes seconds; measured requests should not. Concurrent requests until a round is fast."""
        import concurrent.futures

        def timed() -> float:
            started = time.monotonic()
            try:
                urllib.request.urlopen(f"{self.base_url}/healthz?strict=1", timeout=60).read()
            except OSError:
                return 60.0
            return time.monotonic() - started

        deadline = time.monotonic() + timeout
        with concurrent.futures.ThreadPoolExecutor(self.workers * 3) as pool:
            while time.monotonic() < deadline:
                if max(pool.map(lambda _: timed(), range(self.workers * 3))) < 0.5:
                    return
        log("warning: workers still slow after warm-up")

    def wait_healthy(self, timeout: float = 120) -> float:
        started = time.monotonic()
        last = ""
        while time.monotonic() - started < timeout:
            if self.gunicorn is not None and self.gunicorn.poll() is not None:
                raise RuntimeError(f"gunicorn exited:\n{self.log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/healthz?strict=1", timeout=5) as response:
                    if response.status == 200:
                        return time.monotonic() - started
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}: {exc.read()[:300]!r}"
            except OSError as exc:
                last = repr(exc)
            time.sleep(0.2)
        raise RuntimeError(
            f"{self.base_url}/healthz not healthy after {timeout}s (last: {last}); server log:\n"
            + self.log_path.read_text()[-3000:]
        )

    def worker_pids(self) -> list[int]:
        """The gunicorn master's worker processes (its children)."""
        assert self.gunicorn is not None
        children = Path(f"/proc/{self.gunicorn.pid}/task/{self.gunicorn.pid}/children")
        return [int(pid) for pid in children.read_text().split()]

    def stop(self) -> None:
        if self.gunicorn is not None and self.gunicorn.poll() is None:
            os.killpg(self.gunicorn.pid, signal.SIGTERM)
            try:
                self.gunicorn.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.gunicorn.pid, signal.SIGKILL)
                self.gunicorn.wait(10)
        self.gunicorn = None
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # Django was never set up in this process
            pass
        if self._db_created:
            log(f"dropping database {self.db_name}")
            for _ in range(10):
                try:
                    _admin_sql(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
                    self._db_created = False
                    break
                except Exception as exc:  # PostgreSQL may be restarting (fault runs): try again
                    log(f"drop failed ({exc}); retrying")
                    time.sleep(2)
        if self._autovacuum_held:
            self._autovacuum_held = False
            _autovacuum_release()
        shutil.rmtree(self.var_dir, ignore_errors=True)
