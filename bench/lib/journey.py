"""One simulated participant's whole visit, from the study link to the completion page, and the
statistics the benchmarks report about many of them."""

from __future__ import annotations

import random
import re
import threading
import time
from dataclasses import dataclass, field

from .browser import Browser, Exchange, TransportError, parse_forms

# Page kinds by URL; the entry is the study link itself.
_KINDS = [
    ("consent", re.compile(r"consent")),
    ("instructions", re.compile(r"instruction|tutorial")),
    ("teq", re.compile(r"teq|questionnaire")),
    ("completion", re.compile(r"complete|done|finish|thank")),
    ("rating", re.compile(r"item|rate|rating|answer|step")),
]


def page_kind(path: str) -> str:
    for kind, pattern in _KINDS:
        if pattern.search(path.split("?")[0]):
            return kind
    return "other"


class Recorder:
    """Thread-safe latency samples per (page kind, method) and status counts."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.samples: dict[str, list[float]] = {}
        self.statuses: dict[str, int] = {}
        self.first: float | None = None
        self.last: float | None = None

    def __call__(self, kind: str, method: str, status: int, seconds: float) -> None:
        now = time.monotonic()
        with self.lock:
            self.samples.setdefault(f"{kind} {method}", []).append(seconds)
            self.statuses[str(status)] = self.statuses.get(str(status), 0) + 1
            self.first = now - seconds if self.first is None else min(self.first, now - seconds)
            self.last = now if self.last is None else max(self.last, now)

    @property
    def requests(self) -> int:
        return sum(len(v) for v in self.samples.values())

    def summary(self) -> dict:
        out = {}
        for key, values in sorted(self.samples.items()):
            out[key] = percentiles(values)
        return out


def percentiles(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    ordered = sorted(values)

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)

    return {
        "n": len(ordered),
        "p50_ms": pick(0.50),
        "p95_ms": pick(0.95),
        "p99_ms": pick(0.99),
        "max_ms": pick(1.0),
    }


@dataclass
class Outcome:
    external_id: str
    completed: bool = False
    pages: int = 0
    acknowledged: list[dict] = field(default_factory=list)  # answers the server acknowledged
    retried_posts: int = 0
    error: str = ""
    transport_errors: list[str] = field(default_factory=list)


def run_participant(
    *,
    base_url: str,
    entry_path: str,
    external_id: str,
    client_ip: str,
    recorder: Recorder,
    think_seconds: float,
    completion_marker: str,
    rng: random.Random,
    retry_seconds: float = 60.0,
) -> Outcome:
    """Entry → consent → instructions → (TEQ) → the rating pages → completion, as a person with a
    browser would: think, pick an option, press the affirmative button, follow the redirect."""
    outcome = Outcome(external_id=external_id)
    browser = Browser(base_url, client_ip=client_ip, record=recorder, retry_seconds=retry_seconds)
    try:
        page = _get_following(browser, "entry", entry_path, outcome)
        for _ in range(60):
            if completion_marker in page.body:
                outcome.completed = True
                break
            forms = [f for f in parse_forms(page.body) if f.method == "post"]
            if page.status != 200 or not forms:
                outcome.error = f"stuck at {page.path} (HTTP {page.status}, {len(forms)} forms)"
                break
            form = forms[0]
            kind = page_kind(page.path)
            from .browser import fill_form

            data, chosen = fill_form(form, rng)
            # A person reads, thinks and clicks: longer on rating pages than on consent or instructions.
            time.sleep(think_seconds * rng.uniform(0.5, 1.5) * (1.0 if kind == "rating" else 0.5))
            action = Browser.path_of(form.action or page.path, page.path)
            posted = browser.request(kind, "POST", action, data, referer=base_url + page.path)
            if posted.attempts > 1:
                outcome.retried_posts += 1
            if kind == "rating" and chosen and (300 <= posted.status < 400 or posted.status == 200):
                if posted.status != 200 or "error" not in posted.body.lower():
                    outcome.acknowledged.append(
                        {"path": page.path, "fields": dict(data), "chosen": chosen, "status": posted.status}
                    )
            if 300 <= posted.status < 400:
                page = _get_following(browser, None, Browser.path_of(posted.location, action), outcome)
            else:
                page = _Page(action, posted.status, posted.body)
            outcome.pages += 1
    except TransportError as exc:
        outcome.error = f"gave up: {exc}"
    outcome.transport_errors = browser.errors
    return outcome


@dataclass
class _Page:
    path: str
    status: int
    body: str


def _get_following(browser: Browser, kind: str | None, path: str, outcome: Outcome) -> _Page:
    for _ in range(10):
        exchange: Exchange = browser.request(kind or page_kind(path), "GET", path)
        kind = None
        if 300 <= exchange.status < 400 and exchange.location:
            if exchange.location.startswith("http") and not exchange.location.startswith(browser.origin):
                return _Page(exchange.location, 200, exchange.location)  # off to the recruiting platform
            path = Browser.path_of(exchange.location, path)
            continue
        return _Page(path, exchange.status, exchange.body)
    raise TransportError(f"too many redirects from {path}")
