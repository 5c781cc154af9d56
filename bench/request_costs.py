"""CPU per participant request kind, in-process: Django's test client through the full middleware stack under
production settings (Redis sessions and rate limiter, PostgreSQL, CSRF checks on), no HTTP server, no
network. Half the participants answer in place (JSON), half with form posts and the redirected item page.

    .venv/bin/python bench/request_costs.py [--participants 40] [--redis-url redis://127.0.0.1:6379/6]
        [--round-trips] [--profile KIND]

Prints ONE JSON object: for each kind, the number of requests and the mean CPU ms (process_time of this
process: Django's work, not PostgreSQL's or Redis's, nor gunicorn's HTTP parsing, ~0.3 ms a request). The
test client itself adds a little (building the request); forms are posted urlencoded, as browsers and
bench/participants.py post them. The in-place half posts consent and the instructions in the background too, as
participant.js does (each reply carrying the next step's page). Those background POSTs go through the WSGI
application gunicorn serves (config/wsgi.py), the
other requests through the test client's handler. The same run measures, alongside each participant, the benchmark floor
(`floor POST`: /bench/floor/, one row written through the full middleware stack) and the page ceiling
(`page ceiling GET`: /bench/page/, an item page without a query), so each request kind can be read against
them. The first five participants warm up and are not counted.

`--round-trips` also counts, per request kind, the SQL statements sent to PostgreSQL and the round trips to
Redis (a pipeline is one), at a small CPU cost of its own, and the CPU the PostgreSQL backend serving them
used (`postgres_cpu_ms`, from /proc in 10 ms ticks: a mean over many requests). `--profile KIND` prints to stderr the cProfile
(CPU time) of the requests whose kind contains KIND, e.g. `--profile "in place"`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lib.browser import POSITION, step_fields  # noqa: E402
from bench.lib.cpu import process_cpu_seconds  # noqa: E402
from bench.lib.stack import DEFAULT_CORPUS, Stack  # noqa: E402
from bench.lib.study import study_seed  # noqa: E402

WARM_UP = 5
FORM = "application/x-www-form-urlencoded"


class Meter:
    """What one request costs: CPU always; SQL statements and Redis round trips when asked; a cProfile of
    the request kinds named."""

    def __init__(self, *, round_trips: bool = False, profile: str = "") -> None:
        self.costs: dict[str, list[float]] = {}
        self.trips: dict[str, list[tuple[int, int]]] = {}
        self.round_trips = round_trips
        self.profile = profile
        self.profiler = None
        self._sql = self._redis = 0
        self.pg_pid = None  # the PostgreSQL backend serving this process (with --round-trips)
        self.pg: dict[str, float] = {}
        if profile:
            import cProfile

            self.profiler = cProfile.Profile(time.process_time)

    def install(self) -> None:
        if not self.round_trips:
            return
        from django.db import connection
        from redis.connection import AbstractConnection

        def count_sql(execute, sql, params, many, context):
            self._sql += 1
            return execute(sql, params, many, context)

        connection.execute_wrappers.append(count_sql)
        self._find_backend()
        send = AbstractConnection.send_packed_command

        def counted(connection_, command, check_health=True):
            self._redis += 1
            return send(connection_, command, check_health)

        AbstractConnection.send_packed_command = counted

    def _find_backend(self) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            self.pg_pid = cursor.fetchone()[0]
        self._sql -= 1  # not the requests'

    def timed(self, kind: str, call):
        profiling = self.profiler is not None and self.profile in kind
        sql, redis = self._sql, self._redis
        if profiling:
            self.profiler.enable()
        pg_before = process_cpu_seconds(self.pg_pid) if self.pg_pid else None
        started = time.process_time()
        response = call()
        self.costs.setdefault(kind, []).append(time.process_time() - started)
        pg_after = process_cpu_seconds(self.pg_pid) if pg_before is not None else None
        if pg_after is None and self.pg_pid:
            self._find_backend()  # the request replaced the connection (a warm-up request: not counted)
        elif pg_after is not None:
            # /proc counts in clock ticks (10 ms): summed over hundreds of requests, the mean is what counts.
            self.pg[kind] = self.pg.get(kind, 0.0) + pg_after - pg_before
        if profiling:
            self.profiler.disable()
        self.trips.setdefault(kind, []).append((self._sql - sql, self._redis - redis))
        return response

    def reset(self) -> None:
        self.costs, self.trips, self.pg = {}, {}, {}
        if self.profiler is not None:
            self.profiler.clear()

    def result(self) -> dict:
        figures = {}
        for kind, values in self.costs.items():
            figures[kind] = {"n": len(values), "mean_ms": round(sum(values) / len(values) * 1000, 2)}
            if self.round_trips:
                trips = self.trips[kind]
                figures[kind]["sql"] = round(sum(t[0] for t in trips) / len(trips), 2)
                figures[kind]["redis"] = round(sum(t[1] for t in trips) / len(trips), 2)
                if self.pg_pid:
                    figures[kind]["postgres_cpu_ms"] = round(self.pg.get(kind, 0.0) / len(values) * 1000, 2)
        return figures

    def print_profile(self) -> None:
        if self.profiler is None:
            return
        if not any(self.profile in kind for kind in self.costs):
            print(
                f"--profile {self.profile!r}: no request kind contains it; the kinds: {sorted(self.costs)}",
                file=sys.stderr,
            )
            return
        import pstats

        stats = pstats.Stats(self.profiler, stream=sys.stderr)
        stats.sort_stats("cumulative").print_stats(60)
        stats.sort_stats("tottime").print_stats(40)


def _post(client, path: str, data: dict, **extra):
    """A form POST as a browser sends it (urlencoded; the test client would build a multipart body)."""
    return client.post(path, urlencode(data), content_type=FORM, **extra)


def _front_post(client, front, path: str, data: dict) -> dict:
    """A background POST (participant.js) as gunicorn serves it: through the WSGI application of
    config/wsgi.py (the answer front, then Django), with the test client's cookies; its JSON reply."""
    from django.test.client import FakePayload

    body = urlencode(data).encode()
    environ = client._base_environ(
        PATH_INFO=path,
        REQUEST_METHOD="POST",
        CONTENT_TYPE=FORM,
        CONTENT_LENGTH=str(len(body)),
        HTTP_ACCEPT="application/json",
        **{"wsgi.input": FakePayload(body)},
    )
    started: dict = {}
    response = front(environ, lambda status, headers: started.update(status=status, headers=headers))
    try:
        content = b"".join(response)
    finally:
        response.close()
    for name, value in started["headers"]:
        if name.lower() == "set-cookie":
            client.cookies.load(value)
    return json.loads(content)


def bounds(client, meter: Meter) -> None:
    """The floor and the page ceiling, a few of each per participant, on a fresh browser of their own."""
    timed = meter.timed
    client.cookies = SimpleCookie()
    for _ in range(3):
        timed("floor POST", lambda: _post(client, "/bench/floor/", {}))
        timed("page ceiling GET", lambda: client.get("/bench/page/"))


def walk(client, meter: Meter, *, pid: str, in_place: bool, front=None) -> None:
    timed = meter.timed

    step = "/s/launch/step/"
    timed(
        "entry GET (enrols, redirects)",
        lambda: client.get(f"/s/launch/?PROLIFIC_PID={pid}&STUDY_ID=x&SESSION_ID=s{pid}"),
    )
    page = timed("consent GET", lambda: client.get(step)).content.decode()
    form = step_fields(page)
    if in_place:  # as participant.js posts them, and gunicorn serves them: each reply carries the next step
        consent = {**form, "step": "consent", "decision": "agree"}
        timed("consent POST, in place", lambda: _front_post(client, front, step, consent))
        reply = timed(
            "instructions POST, in place",
            lambda: _front_post(client, front, step, {**form, "step": "instructions"}),
        )
        position = POSITION.search(reply["page"]).group(1)
    else:
        timed("consent POST", lambda: _post(client, step, {**form, "step": "consent", "decision": "agree"}))
        timed("instructions GET", lambda: client.get(step))
        timed("instructions POST", lambda: _post(client, step, {**form, "step": "instructions"}))
        position = POSITION.search(timed("item GET", lambda: client.get(step)).content.decode()).group(1)
    for _ in range(10):
        answer = {**form, "step": "items", "position": position, "value": 3}
        if in_place:
            reply = timed("answer, in place (JSON)", lambda a=answer: _front_post(client, front, step, a))
            position = reply.get("item", {}).get("position")
            continue
        timed("answer, form POST (redirect)", lambda a=answer: _post(client, step, a))
        found = POSITION.search(timed("item GET", lambda: client.get(step)).content.decode())
        position = found.group(1) if found else None
    if in_place:
        timed("completion GET", lambda: client.get(step))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--participants", type=int, default=40)
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/6"))
    parser.add_argument(
        "--round-trips", action="store_true", help="count SQL statements and Redis round trips"
    )
    parser.add_argument(
        "--profile", default="", metavar="KIND", help="cProfile the request kinds containing KIND"
    )
    args = parser.parse_args(argv)
    meter = Meter(round_trips=args.round_trips, profile=args.profile)
    with Stack(workers=1, redis_url=args.redis_url, name="costs") as stack:
        os.environ.update(SECURE_SSL_REDIRECT="0", BENCH_FLOOR_ENABLED="1")
        stack.django_setup()
        from django.db import connection

        # As a web worker keeps it (django_setup sets 0 for the seeding scripts): the front's requests close
        # their connection at the end when it is older than this, as under gunicorn.
        connection.close()
        connection.settings_dict["CONN_MAX_AGE"] = 60
        study_seed(stack, slug="launch", corpus=DEFAULT_CORPUS, ask_teq=False, quota_per_condition=100_000)
        from django.test import Client

        from config.wsgi import application as front

        client = Client(enforce_csrf_checks=True, HTTP_HOST="127.0.0.1")
        meter.install()
        run = f"{os.getpid() % 250}"
        for i in range(args.participants + WARM_UP):
            client.cookies = SimpleCookie()  # a new browser; one client, so the middleware is loaded once
            client.defaults["REMOTE_ADDR"] = f"10.{run}.{i // 250}.{i % 250}"
            walk(client, meter, pid=f"costs{run}x{i:05d}", in_place=bool(i % 2), front=front)
            client.defaults["REMOTE_ADDR"] = f"10.{run}.255.{i % 250}"
            bounds(client, meter)
            if i == WARM_UP - 1:
                meter.reset()
    meter.print_profile()
    result = {
        "benchmark": "request_costs",
        "participants": args.participants,
        "cpu_ms_per_request": meter.result(),
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
