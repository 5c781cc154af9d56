"""Benchmark: a simulated Prolific launch of 1,000 sessions against a loopback Prolific.

The loopback Prolific (tests/recruiting/loopback.py, on pytest-httpserver's server) holds the study and its
submissions; this site's webhook endpoint is served over real HTTP from a thread of this process and the
events are processed by a real Celery worker process on Redis. 15 % of the sessions return or time out part
way through; every webhook is delivered three times, some out of order, and 5 % of the status changes lose
all their deliveries (a reconciliation through every page of submissions repairs them at the end).

Prints one JSON object:
* items_over_filled / items_under_filled — responses whose answered ratings are above the ceiling or below
  the floor of their condition's mean (goal 0: freed items go to the next participants at once);
* double_approvals — participants approved more than once on Prolific (goal 0);
* double_bonuses — bonus payments received more than once (goal 0), with two concurrent payers and a pay
  call that succeeds but answers too late;
* webhook_to_freed_place_seconds — from the first delivery of a RETURNED/TIMED-OUT event to our participant's
  place and items being freed: p50, p95, max (goal < 5);
* reconciled — submissions whose status here equals Prolific's after `prolific_sync`, overall and among
  those past the first page (goal 100 %).

Standalone: its own PostgreSQL database (empathy_bench_prolific, dropped afterwards), a Celery worker on
Redis (BENCH_REDIS_URL, default redis://127.0.0.1:6379/8) on a queue of its own. It never restarts or stops
PostgreSQL or Redis.

    .venv/bin/python bench/prolific.py [--sessions 1000] [--threads 8]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PG_ADMIN = os.environ.get("BENCH_PG_ADMIN", "postgres://postgres@127.0.0.1:5432")
DB_NAME = "empathy_bench_prolific"
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/8")
SECRET = "bench-webhook-secret"
ENV = {
    "BENCH_PROLIFIC_TOKEN": "bench-token-not-secret",
    "BENCH_PROLIFIC_SECRET": SECRET,
    "PROLIFIC_BACKOFF_BASE_MS": "50",
    "PROLIFIC_BACKOFF_CAP_MS": "500",
    "LOG_LEVEL": "WARNING",
    "DJANGO_ENV": "test",
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "RATELIMIT_ENABLED": "false",
    # Every request thread of the loopback site closes its connection when the request ends: PostgreSQL is
    # shared, and a thread per request with persistent connections would exhaust its clients.
    "DB_CONN_MAX_AGE": "0",
}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--leave-rate", type=float, default=0.15)
    parser.add_argument(
        "--lost-rate", type=float, default=0.05, help="status changes whose webhooks all get lost"
    )
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument(
        "--beat-seconds", type=float, default=15.0, help="the reconciliation beat, accelerated"
    )
    return parser.parse_args()


def database(action: str) -> None:
    import psycopg2

    admin = psycopg2.connect(f"{PG_ADMIN}/postgres")
    admin.autocommit = True
    with admin.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        if action == "create":
            cursor.execute(f'CREATE DATABASE "{DB_NAME}"')
    admin.close()


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 256


def serve_site() -> tuple[str, WSGIServer]:
    from django.core.wsgi import get_wsgi_application

    server = make_server("127.0.0.1", 0, get_wsgi_application(), _ThreadingWSGIServer, _QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server


def worker_wait(app, timeout: float = 120.0) -> float:
    """Waits until the worker answers a ping (a cold start on a busy machine takes seconds). The broker's
    Redis database is the bench's own, so the only worker that can answer is ours."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if app.control.ping(timeout=1.0):
            return time.monotonic() - began
    raise RuntimeError(f"the Celery worker did not start within {timeout} s")


def beat(stop: threading.Event, every: float) -> None:
    """The beat job, on an accelerated schedule (production: PROLIFIC_RECONCILE_SECONDS, 300 s)."""
    from recruiting.tasks import prolific_reconcile_all

    while not stop.wait(every):
        prolific_reconcile_all.delay()


class Launch:
    """The simulated launch: participants, Prolific's places and the webhook deliveries."""

    def __init__(self, args, fake, link, site_url):
        import requests

        self.args, self.fake, self.link = args, fake, link
        self.rng = random.Random(args.seed)
        # Exactly `leave_rate` of the sessions leave, none among the last tenth: Prolific re-offers a freed
        # place to a newcomer, so the launch ends with every place taken by someone who completed.
        leavers = round(args.sessions * args.leave_rate)
        self.leavers = set(self.rng.sample(range(int(args.sessions * 0.9)), leavers))
        self.rng_lock = threading.Lock()
        self.webhook_url = f"{site_url}/recruiting/prolific/webhook/{link.study.slug}/"
        self.http = threading.local()
        self.requests = requests
        self.places = threading.Semaphore(link.places)  # Prolific never lets more than `places` in at once
        self.sent_at: dict[str, float] = {}  # pid -> first delivery of the freeing event
        self.lost = 0
        self.refused_full = 0
        self.counter = 0
        self.deliveries = 0
        self.failed_deliveries = 0

    def _session(self):
        if not hasattr(self.http, "session"):
            self.http.session = self.requests.Session()
        return self.http.session

    def _draw(self, fn):
        with self.rng_lock:
            return fn(self.rng)

    def deliver(self, submission_id: str, status: str, event_time: float) -> float | None:
        """Prolific's webhook for this status, three times (a redelivery each), unless the event is lost."""
        if self._draw(lambda r: r.random() < self.args.lost_rate):
            self.lost += 1
            return None
        payload = {**self.fake.submission_event(submission_id), "status": status}
        event_id = uuid.uuid4().hex
        first = None
        for _ in range(3):
            body, headers = self.fake.signed(SECRET, payload, event_id=event_id, event_time=event_time)
            headers["Content-Type"] = "application/json"
            sent = time.time()
            self._post_until_accepted(body, headers)
            first = first or sent
        return first

    def _post_until_accepted(self, body: bytes, headers: dict) -> None:
        """One delivery. A failed one (an error answer or none: the shared PostgreSQL may refuse a connection)
        is delivered again after a pause, as Prolific redelivers on failure; failures are counted."""
        for attempt in range(10):
            try:
                answer = self._session().post(self.webhook_url, data=body, headers=headers, timeout=10)
            except self.requests.RequestException:
                answer = None
            if answer is not None and answer.status_code == 200:
                self.deliveries += 1
                return
            self.failed_deliveries += 1
            time.sleep(0.5 * (attempt + 1))
        raise RuntimeError("a webhook delivery failed ten times")

    def session(self, index: int) -> None:
        from kinds.rating.services import rating_submit
        from studies.models import Assignment, Participant
        from studies.participants import StudyFull, participant_advance, participant_enroll

        pid = f"BENCH{index:05d}"
        leaves = index in self.leavers
        self.places.acquire()
        sub = self.fake.add_submission(self.link.prolific_study_id, pid, "ACTIVE")
        started = time.time()
        late_active = self._draw(lambda r: r.random() < 0.3)  # its ACTIVE event arrives after the next one
        if not late_active:
            self.deliver(sub["id"], "ACTIVE", started)
        try:
            participant = participant_enroll(
                study=self.link.study,
                external_id=pid,
                platform="prolific",
                platform_study_id=self.link.prolific_study_id,
                platform_session_id=sub["id"],
            )
        except StudyFull:
            self.refused_full += 1
            self.fake.set_status(sub["id"], "RETURNED")
            self.places.release()
            return
        for step in (Participant.Step.CONSENT, Participant.Step.INSTRUCTIONS):
            participant_advance(participant=participant, from_step=step)
        assignments = list(Assignment.objects.filter(participant=participant).order_by("position"))
        answer_count = self._draw(lambda r: r.randrange(len(assignments))) if leaves else len(assignments)
        for assignment in assignments[:answer_count]:
            value = (
                assignment.attention_check.expected_value
                if assignment.attention_check_id
                else self._draw(lambda r: r.choice([1, 2, 3]))
            )
            rating_submit(participant=participant, position=assignment.position, value=value)
        if leaves:
            status = self._draw(lambda r: r.choice(["RETURNED", "TIMED-OUT"]))
            self.fake.set_status(sub["id"], status)
            sent = self.deliver(sub["id"], status, time.time())
            if sent is not None:
                self.sent_at[pid] = sent
            self.places.release()  # Prolific offers the place again at once
        else:
            self.fake.set_status(sub["id"], "AWAITING REVIEW")
            self.deliver(sub["id"], "AWAITING REVIEW", time.time())
        if late_active:
            self.deliver(sub["id"], "ACTIVE", started)
        from django.db import connection

        connection.close()

    def run(self, sessions: int) -> float:
        began = time.monotonic()
        with ThreadPoolExecutor(self.args.threads) as pool:
            for future in [pool.submit(self.session, i) for i in range(sessions)]:
                future.result()
        return time.monotonic() - began


def wait_for_events(timeout: float = 120.0) -> int:
    from recruiting.models import WebhookEvent

    stop = time.monotonic() + timeout
    while time.monotonic() < stop:
        left = WebhookEvent.objects.filter(processed_at__isnull=True).count()
        if not left:
            return 0
        time.sleep(0.2)
    return left


def fill_balance(study) -> dict:
    """Responses above the ceiling / below the floor of their condition's mean answered ratings."""
    from django.db.models import Count, Q

    from studies.models import Response

    over = under = 0
    for condition in study.conditions.all():
        counts = list(
            Response.objects.filter(condition=condition)
            .annotate(n=Count("assignments", filter=Q(assignments__answered_at__isnull=False)))
            .values_list("n", flat=True)
        )
        mean = sum(counts) / len(counts)
        over += sum(1 for n in counts if n > -(-sum(counts) // len(counts)))
        under += sum(1 for n in counts if n < int(mean))
    return {"items_over_filled": over, "items_under_filled": under}


def main():  # noqa: PLR0915 - one linear scenario, easier to follow in one place
    args = parse_args()
    database("create")
    queue = f"bench-prolific-{uuid.uuid4().hex[:8]}"
    os.environ.update(ENV, DATABASE_URL=f"{PG_ADMIN}/{DB_NAME}", REDIS_URL=REDIS_URL)
    worker = server = None
    try:
        from pytest_httpserver import HTTPServer

        from tests.recruiting.loopback import LoopbackProlific

        httpserver = HTTPServer(host="127.0.0.1", port=0, threaded=True)
        httpserver.start()
        fake = LoopbackProlific(httpserver)
        os.environ["PROLIFIC_API_URL"] = fake.base_url

        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from config.celery import app
        from tests.generation.test_celery_worker import _kill as kill_worker
        from tests.generation.test_celery_worker import _start_worker as start_worker

        app.conf.task_default_queue = queue
        from decimal import Decimal

        from recruiting.bonuses import bonuses_grant_per_rating, bonuses_pay
        from recruiting.launch import prolific_study_act, prolific_study_create
        from recruiting.models import ProlificStudy, ProlificSubmission
        from recruiting.submissions import submissions_reconcile
        from studies.models import Participant
        from tests.factories import AttentionCheckFactory, rating_study_build

        # 2 conditions × 425 places = 850 completions; 85 responses each, 5 items: 25 ratings per response.
        completions = round(args.sessions * (1 - args.leave_rate))
        quota = completions // 2
        study = rating_study_build(
            conditions=2, prompts=quota // 5, items_per_participant=5, quota_per_condition=quota
        )
        AttentionCheckFactory(study=study, after_item=2, expected_value=2)
        link = ProlificStudy.objects.create(
            study=study,
            token_env="BENCH_PROLIFIC_TOKEN",
            webhook_secret_env="BENCH_PROLIFIC_SECRET",
            site_url="https://bench.example.org",
            prolific_name="Bench",
            prolific_description="Bench launch",
            reward=100,
            estimated_minutes=10,
            auto_approve=True,
        )
        prolific_study_create(link=link)
        prolific_study_act(link=link, action="publish")
        link.refresh_from_db()

        # The same worker process the suite's Celery tests start (threads pool, a queue of its own).
        worker = start_worker(queue, REDIS_URL, Path(os.environ.get("TMPDIR", "/tmp")) / f"{queue}.log")
        worker_wait(app)
        site_url, server = serve_site()
        launch = Launch(args, fake, link, site_url)
        stop_beat = threading.Event()
        threading.Thread(target=beat, args=(stop_beat, args.beat_seconds), daemon=True).start()
        launch_seconds = launch.run(args.sessions)
        stop_beat.set()
        unprocessed = wait_for_events()

        freed = dict(
            Participant.objects.filter(study=study, external_id__in=list(launch.sent_at))
            .exclude(finished_at=None)
            .values_list("external_id", "finished_at")
        )
        latencies = sorted(
            max(0.0, freed[pid].timestamp() - sent) for pid, sent in launch.sent_at.items() if pid in freed
        )
        not_freed_by_webhook = len(launch.sent_at) - len(latencies)

        before = {
            s: st
            for s, st in ProlificSubmission.objects.filter(link=link).values_list("submission_id", "status")
        }
        # `prolific_sync`: the first pass repairs what lost webhooks left and approves what is due; Prolific
        # then says APPROVED for those (a webhook the loopback does not send), which the second pass reads.
        report = submissions_reconcile(link=link)
        submissions_reconcile(link=link)
        ours = dict(ProlificSubmission.objects.filter(link=link).values_list("submission_id", "status"))
        ordered = sorted(fake.submissions)  # the loopback pages submissions in id order, 20 a page
        matched = [sid for sid in ordered if ours.get(sid) == fake.submissions[sid]["status"]]
        past_first = ordered[fake.page_size :]
        repaired = sum(1 for sid in ordered if before.get(sid) != fake.submissions[sid]["status"])

        bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.02"))
        fake.pay_hangs_after_success = 0.0
        payers = [threading.Thread(target=lambda: bonuses_pay(link=link)) for _ in range(2)]
        for t in payers:
            t.start()
        for t in payers:
            t.join()
        bonuses_grant_per_rating(link=link, amount_per_rating=Decimal("0.01"), reason="late-top-up")
        from django.conf import settings

        settings.PROLIFIC_TIMEOUT_SECONDS = 0.5
        fake.pay_hangs_after_success = 1.5  # paid, but the answer is lost: the next run must not pay again
        bonuses_pay(link=link)
        bonuses_pay(link=link)
        statuses = Participant.objects.filter(study=study)
        result = {
            "sessions": args.sessions,
            "leavers_planned": len(launch.leavers),
            "returned_or_timed_out": statuses.filter(status__in=["returned", "timed_out"]).count(),
            "completed": statuses.filter(status="completed").count(),
            "refused_study_full": launch.refused_full,
            "webhook_deliveries": launch.deliveries,
            "webhook_deliveries_failed_and_redelivered": launch.failed_deliveries,
            "events_lost_on_purpose": launch.lost,
            "events_unprocessed_after_wait": unprocessed,
            **fill_balance(study),
            "double_approvals": sum(n - 1 for n in fake.approvals.values() if n > 1),
            "approved": len(fake.approvals),
            "double_bonuses": sum(n - 1 for n in fake.bonus_paid.values() if n > 1),
            "bonus_payments": sum(fake.bonus_paid.values()),
            "pay_calls": sum(fake.pay_calls.values()),
            "webhook_to_freed_place_seconds": {
                "n": len(latencies),
                "p50": round(statistics.median(latencies), 3) if latencies else None,
                "p95": round(latencies[int(0.95 * (len(latencies) - 1))], 3) if latencies else None,
                "max": round(latencies[-1], 3) if latencies else None,
                "not_freed_by_their_webhook": not_freed_by_webhook,
            },
            "reconciled": {
                "submissions": len(ordered),
                "pages_read": -(-report.seen // fake.page_size),
                "repaired_by_sync": repaired,
                "percent": round(100 * len(matched) / len(ordered), 2),
                "percent_past_first_page": round(
                    100 * sum(1 for s in past_first if s in matched) / len(past_first), 2
                ),
                "missing_on_prolific": len(report.missing_on_prolific),
            },
            "launch_seconds": round(launch_seconds, 1),
        }
        print(json.dumps(result))
    finally:
        if worker is not None:
            kill_worker(worker)
        if server is not None:
            server.shutdown()
        from django.db import connections

        connections.close_all()
        database("drop")


if __name__ == "__main__":
    main()
