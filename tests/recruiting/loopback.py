"""A loopback Prolific for tests and bench/prolific.py: the v1 endpoints recruiting/ calls, with the shapes
of Prolific's public docs, served by pytest-httpserver's HTTPServer.

It keeps its own state (studies, submissions, bulk bonuses) and records every call that matters to the
invariants: approvals per participant and pay calls per bulk bonus. Faults are injected per path prefix
(`fail(prefix, [429, 503])`), after the call took effect (`fail_after_effect(prefix, [500])`), and for the pay call that succeeds and then answers too late
(`pay_hangs_after_success`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import re
import threading
import time
from collections import Counter, defaultdict
from decimal import Decimal

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

PAGE_SIZE = 20


class LoopbackProlific:
    def __init__(self, server: HTTPServer, *, page_size: int = PAGE_SIZE):
        self.server = server
        self.page_size = page_size
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.studies: dict[str, dict] = {}
        self.submissions: dict[str, dict] = {}
        self.bulk_bonuses: dict[str, dict] = {}
        self.approvals: Counter = Counter()  # participant id -> times approved
        self.pay_calls: Counter = Counter()  # bulk id -> pay calls that reached us
        self.bonus_paid: Counter = Counter()  # (participant id, amount) payments
        self.calls: list[tuple[str, str]] = []
        self.faults: dict[str, list] = defaultdict(list)
        self.faults_after: dict[str, list] = defaultdict(list)  # the call takes effect, then this answer
        self.pay_hangs_after_success = 0.0
        self.pay_hangs_before_paying = 0.0  # the call in flight: the bulk bonus still reads as unpaid
        self.tokens_seen: set[str] = set()
        self.bonus_readback_missing = False  # the undocumented read-back answers 404
        self.hooks: dict[str, dict] = {}  # webhook subscriptions by id
        self.hook_secrets: dict[str, str] = {}  # subscription id -> X-Hook-Secret to confirm it
        server.expect_request(re.compile(".*")).respond_with_handler(self.handle)

    # --- helpers for tests --------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return self.server.url_for("/api/v1/")

    def fail(self, prefix: str, statuses: list, retry_after: str = "0") -> None:
        """The next calls whose path starts with `prefix` answer these statuses, in order."""
        self.faults[prefix].extend((status, retry_after) for status in statuses)

    def fail_after_effect(self, prefix: str, statuses: list) -> None:
        """The next calls whose path starts with `prefix` do what they do, then answer these statuses."""
        self.faults_after[prefix].extend(statuses)

    def add_submission(
        self, study_id: str, pid: str, status: str = "ACTIVE", submission_id: str = ""
    ) -> dict:
        with self.lock:
            submission_id = submission_id or f"sub{next(self.ids):06d}"
            item = {
                "id": submission_id,
                "participant_id": pid,
                "study_id": study_id,
                "status": status,
                "started_at": "2026-01-01T10:00:00Z",
                "completed_at": None,
                "bonus_payments": [],  # each bonus paid on the submission, in pence (Prolific's GET shows it)
            }
            self.submissions[submission_id] = item
            return item

    def set_status(self, submission_id: str, status: str) -> dict:
        with self.lock:
            self.submissions[submission_id]["status"] = status
            return dict(self.submissions[submission_id])

    # --- the API ------------------------------------------------------------------------------------

    def _json(self, data, status=200, headers=None):
        return Response(json.dumps(data), status=status, headers=headers, content_type="application/json")

    def handle(self, request: Request) -> Response:
        response = self._handle(request)
        path = request.path.removeprefix("/api/v1/")
        with self.lock:
            for prefix, queue in self.faults_after.items():
                if path.startswith(prefix) and queue:
                    return self._json({"error": "injected after the effect"}, status=queue.pop(0))
        return response

    def _handle(self, request: Request) -> Response:
        path = request.path.removeprefix("/api/v1/")
        self.tokens_seen.add(request.headers.get("Authorization", ""))
        with self.lock:
            self.calls.append((request.method, path))
            for prefix, queue in self.faults.items():
                if path.startswith(prefix) and queue:
                    status, retry_after = queue.pop(0)
                    return self._json(
                        {"error": "injected"}, status=status, headers={"Retry-After": retry_after}
                    )
        body = request.get_json(silent=True) or {}
        route = (request.method, path)
        if route == ("POST", "studies/"):
            return self._study_create(body)
        if m := re.fullmatch(r"studies/(\w+)/transition/", path):
            return self._study_transition(m[1], body)
        if m := re.fullmatch(r"studies/(\w+)/submissions/", path):
            return self._submissions_page(request, m[1])
        if m := re.fullmatch(r"studies/(\w+)/", path):
            study = self.studies.get(m[1])
            if study is None:
                return self._json({"error": "not found"}, 404)
            if request.method == "PATCH":
                study.update(body)
            return self._json(study)
        if m := re.fullmatch(r"submissions/(\w+)/", path):
            return self._json(self.submissions[m[1]]) if m[1] in self.submissions else self._json({}, 404)
        if route == ("POST", "submissions/bulk-approve/"):
            return self._bulk_approve(body)
        if m := re.fullmatch(r"submissions/(\w+)/transition/", path):
            return self._submission_transition(m[1], body)
        if route == ("POST", "submissions/bonus-payments/"):
            return self._bonus_set_up(body)
        if m := re.fullmatch(r"bulk-bonus-payments/(\w+)/pay/", path):
            return self._bonus_pay(m[1])
        if m := re.fullmatch(r"bulk-bonus-payments/(\w+)/", path):
            if self.bonus_readback_missing:
                return self._json({"error": {"status": 404, "title": "Not found"}}, 404)
            return self._json(self.bulk_bonuses[m[1]])
        if path == "hooks/subscriptions/":
            return self._hooks(request, body)
        if m := re.fullmatch(r"hooks/subscriptions/(\w+)/", path):
            return self._hook_confirm(m[1], body)
        return self._json({"error": f"no route {route}"}, 404)

    def _study_create(self, body):
        required = [
            "name",
            "description",
            "external_study_url",
            "estimated_completion_time",
            "reward",
            "total_available_places",
            "completion_codes",
        ]
        missing = [f for f in required if f not in body]
        if missing or "{{%PROLIFIC_PID%}}" not in body.get("external_study_url", ""):
            return self._json({"error": {"missing": missing}}, 400)
        with self.lock:
            study_id = f"st{next(self.ids):08d}"
            self.studies[study_id] = {**body, "id": study_id, "status": "UNPUBLISHED"}
        return self._json(self.studies[study_id], 201)

    def _study_transition(self, study_id, body):
        target = {"PUBLISH": "ACTIVE", "PAUSE": "PAUSED", "START": "ACTIVE", "STOP": "AWAITING REVIEW"}
        action = body.get("action")
        if study_id not in self.studies or action not in target:
            return self._json({"error": "bad transition"}, 400)
        self.studies[study_id]["status"] = target[action]
        return self._json(self.studies[study_id])

    def _submissions_page(self, request, study_id):
        items = sorted(
            (s for s in self.submissions.values() if s["study_id"] == study_id), key=lambda s: s["id"]
        )
        page = int(request.args.get("page", "1"))
        chunk = items[(page - 1) * self.page_size : page * self.page_size]
        has_next = page * self.page_size < len(items)
        nxt = self.server.url_for(f"/api/v1/studies/{study_id}/submissions/") + f"?page={page + 1}"
        return self._json(
            {
                "results": chunk,
                "_links": {"next": {"href": nxt if has_next else None}},
                "meta": {"count": len(items)},
            }
        )

    def _bulk_approve(self, body):
        with self.lock:
            for pid in body.get("participant_ids", []):
                self.approvals[pid] += 1
                for sub in self.submissions.values():
                    if sub["participant_id"] == pid and sub["study_id"] == body.get("study_id"):
                        sub["status"] = "APPROVED"
        return self._json({"message": "The request to bulk approve has been made successfully."})

    def _submission_transition(self, submission_id, body):
        sub = self.submissions.get(submission_id)
        if sub is None or sub["status"] != "AWAITING REVIEW":
            return self._json({"error": "not awaiting review"}, 400)
        if body.get("action") == "REJECT":
            if not body.get("rejection_category") or len(body.get("message", "")) < 100:
                return self._json({"error": "category and message required"}, 400)
            sub["status"] = "REJECTED"
        elif body.get("action") == "APPROVE":
            sub["status"] = "APPROVED"
            self.approvals[sub["participant_id"]] += 1
        return self._json(sub)

    def _bonus_set_up(self, body):
        rows = [line.split(",") for line in body.get("csv_bonuses", "").strip().splitlines()]
        with self.lock:
            known = {
                s["participant_id"]
                for s in self.submissions.values()
                if s["study_id"] == body.get("study_id")
            }
            invalid = [pid for pid, _ in rows if pid not in known]
            if invalid:  # Prolific's documented refusal: the whole request, for one unknown id
                return self._json(
                    {
                        "error": {
                            "status": 400,
                            "error_code": 140001,
                            "title": "Invalid request",
                            "detail": {"csv_bonuses": [f"Invalid ids: {', '.join(invalid)}"]},
                        }
                    },
                    400,
                )
            bulk_id = f"bb{next(self.ids):06d}"
            self.bulk_bonuses[bulk_id] = {
                "id": bulk_id,
                "study": body.get("study_id"),
                "status": "SET_UP",
                "rows": rows,
            }
        return self._json({"id": bulk_id, "study": body.get("study_id"), "amount": 0}, 201)

    def _bonus_pay(self, bulk_id):
        with self.lock:
            before = self.pay_hangs_before_paying
            self.pay_hangs_before_paying = 0.0
        if before:
            time.sleep(before)
        with self.lock:
            self.pay_calls[bulk_id] += 1
            bulk = self.bulk_bonuses[bulk_id]
            for pid, amount in bulk["rows"]:
                self.bonus_paid[(pid, str(Decimal(amount)))] += 1
                for sub in self.submissions.values():
                    if sub["participant_id"] == pid and sub["study_id"] == bulk["study"]:
                        sub["bonus_payments"].append(int(Decimal(amount) * 100))
            bulk["status"] = "PAID"
            hang = self.pay_hangs_after_success
            self.pay_hangs_after_success = 0.0
        if hang:
            time.sleep(hang)  # paid, but the answer comes after the caller gave up
        return self._json({}, 202)

    def _hooks(self, request, body):
        if request.method == "GET":
            workspace = request.args.get("workspace_id")
            return self._json({"results": [h for h in self.hooks.values() if h["workspace_id"] == workspace]})
        if not str(body.get("target_url", "")).startswith("https://") or not body.get("workspace_id"):
            return self._json({"error": {"status": 400, "title": "target_url must use https"}}, 400)
        with self.lock:
            hook_id = f"hk{next(self.ids):06d}"
            self.hooks[hook_id] = {
                "id": hook_id,
                "event_type": body.get("event_type"),
                "target_url": body["target_url"],
                "workspace_id": body["workspace_id"],
                "is_enabled": False,  # until confirmed with the X-Hook-Secret
            }
            self.hook_secrets[hook_id] = f"hooksecret-{hook_id}"
        return self._json(self.hooks[hook_id], 201, headers={"X-Hook-Secret": self.hook_secrets[hook_id]})

    def _hook_confirm(self, hook_id, body):
        if hook_id not in self.hooks or body.get("secret") != self.hook_secrets.get(hook_id):
            return self._json({"error": {"status": 400, "title": "Invalid secret"}}, 400)
        self.hooks[hook_id]["is_enabled"] = True
        return self._json(self.hooks[hook_id])

    # --- webhooks -----------------------------------------------------------------------------------

    @staticmethod
    def signed(
        secret: str,
        payload: dict,
        *,
        event_id: str,
        event_time: float | None = None,
        sent: float | None = None,
    ):
        """The body and headers of one webhook delivery, signed as Prolific documents it."""
        body = json.dumps(payload).encode()
        timestamp = str(int(sent or time.time()))
        signature = base64.b64encode(
            hmac.new(secret.encode(), timestamp.encode() + body, hashlib.sha256).digest()
        )
        headers = {
            "X-Prolific-Request-Signature": signature.decode(),
            "X-Prolific-Request-Timestamp": timestamp,
            "X-Event-ID": event_id,
            "X-Timestamp": str(event_time if event_time is not None else time.time()),
        }
        return body, headers

    def submission_event(self, submission_id: str) -> dict:
        sub = self.submissions[submission_id]
        return {
            "resource_id": submission_id,
            "event_type": "submission.status.change",
            "participant_id": sub["participant_id"],
            "status": sub["status"],
        }
