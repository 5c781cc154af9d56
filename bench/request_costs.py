"""CPU per participant request kind, in-process: Django's test client through the full middleware stack under
production settings (Redis sessions and rate limiter, PostgreSQL, CSRF checks on), no HTTP server, no
network. Half the participants answer in place (JSON), half with form posts and the redirected item page.

    .venv/bin/python bench/request_costs.py [--participants 40] [--redis-url redis://127.0.0.1:6379/6]

Prints ONE JSON object: for each kind, the number of requests and the mean CPU ms (process_time of this
process: Django's work, not PostgreSQL's or Redis's, nor gunicorn's HTTP parsing, ~0.3 ms a request). The
test client itself adds a little (building the request); forms are posted urlencoded, as browsers and
bench/participants.py post them. The same run measures, alongside each participant, the benchmark floor
(`floor POST`: /bench/floor/, one row written through the full middleware stack) and the page ceiling
(`page ceiling GET`: /bench/page/, an item page without a query), so each request kind can be read against
them. The first five participants warm up and are not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lib.stack import DEFAULT_CORPUS, Stack  # noqa: E402
from bench.lib.study import study_seed  # noqa: E402

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
POSITION = re.compile(r'name="position" value="(\d+)"')
WARM_UP = 5
FORM = "application/x-www-form-urlencoded"


def _timer(costs: dict):
    def timed(kind: str, call):
        started = time.process_time()
        response = call()
        costs.setdefault(kind, []).append(time.process_time() - started)
        return response

    return timed


def _post(client, path: str, data: dict, **extra):
    """A form POST as a browser sends it (urlencoded; the test client would build a multipart body)."""
    return client.post(path, urlencode(data), content_type=FORM, **extra)


def bounds(client, costs: dict) -> None:
    """The floor and the page ceiling, a few of each per participant, on a fresh browser of their own."""
    timed = _timer(costs)
    client.cookies = SimpleCookie()
    for _ in range(3):
        timed("floor POST", lambda: _post(client, "/bench/floor/", {}))
        timed("page ceiling GET", lambda: client.get("/bench/page/"))


def walk(client, costs: dict, *, pid: str, in_place: bool) -> None:
    timed = _timer(costs)

    step = "/s/launch/step/"
    timed(
        "entry GET (enrols, redirects)",
        lambda: client.get(f"/s/launch/?PROLIFIC_PID={pid}&STUDY_ID=x&SESSION_ID=s{pid}"),
    )
    page = timed("consent GET", lambda: client.get(step)).content.decode()
    form = {"csrfmiddlewaretoken": TOKEN.search(page).group(1), "contact_me_by_fax_only": ""}
    timed("consent POST", lambda: _post(client, step, {**form, "step": "consent", "decision": "agree"}))
    timed("instructions GET", lambda: client.get(step))
    timed("instructions POST", lambda: _post(client, step, {**form, "step": "instructions"}))
    position = POSITION.search(timed("item GET", lambda: client.get(step)).content.decode()).group(1)
    for _ in range(10):
        answer = {**form, "step": "items", "position": position, "value": 3}
        if in_place:
            reply = timed(
                "answer, in place (JSON)",
                lambda a=answer: _post(client, step, a, HTTP_ACCEPT="application/json"),
            )
            position = reply.json().get("item", {}).get("position")
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
    args = parser.parse_args(argv)
    with Stack(workers=1, redis_url=args.redis_url, name="costs") as stack:
        os.environ.update(SECURE_SSL_REDIRECT="0", DB_CONN_MAX_AGE="60", BENCH_FLOOR_ENABLED="1")
        stack.django_setup()
        study_seed(stack, slug="launch", corpus=DEFAULT_CORPUS, ask_teq=False, quota_per_condition=100_000)
        from django.test import Client

        client = Client(enforce_csrf_checks=True, HTTP_HOST="127.0.0.1")
        costs: dict[str, list[float]] = {}
        run = f"{os.getpid() % 250}"
        for i in range(args.participants + WARM_UP):
            client.cookies = SimpleCookie()  # a new browser; one client, so the middleware is loaded once
            client.defaults["REMOTE_ADDR"] = f"10.{run}.{i // 250}.{i % 250}"
            walk(client, costs, pid=f"costs{run}x{i:05d}", in_place=bool(i % 2))
            client.defaults["REMOTE_ADDR"] = f"10.{run}.255.{i % 250}"
            bounds(client, costs)
            if i == WARM_UP - 1:
                costs = {}
    result = {
        "benchmark": "request_costs",
        "participants": args.participants,
        "cpu_ms_per_request": {
            kind: {"n": len(values), "mean_ms": round(sum(values) / len(values) * 1000, 2)}
            for kind, values in costs.items()
        },
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
