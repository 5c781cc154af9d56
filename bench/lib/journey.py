"""One simulated participant's whole visit, from the study link to the completion page, and the
statistics the benchmarks report about many of them."""

from __future__ import annotations

import dataclasses
import json
import random
import re
import threading
import time
from dataclasses import dataclass, field

from .browser import Browser, Exchange, Form, TransportError, fill_form, parse_forms

# The step page is one URL for every step: a page's kind is the hidden `step` field of its form.
_STEP_INPUT = re.compile(r"<input\b[^>]*\bname=[\"']step[\"'][^>]*>", re.IGNORECASE)
_VALUE = re.compile(r"\bvalue=[\"']([^\"']*)[\"']", re.IGNORECASE)
_STEP_KINDS = {"consent": "consent", "instructions": "instructions", "teq": "teq", "items": "rating"}
COMPLETION_MARKERS: list[str] = []


def page_step(body: str) -> str | None:
    match = _STEP_INPUT.search(body)
    if not match:
        return None
    value = _VALUE.search(match.group(0))
    return value.group(1) if value else None


def page_kind(status: int, body: str) -> str:
    """consent / instructions / teq / rating (an item page) / completion / other."""
    step = page_step(body)
    if step:
        return _STEP_KINDS.get(step, step)
    if any(marker in body for marker in COMPLETION_MARKERS):
        return "completion"
    return "other" if status < 400 else f"error_{status}"


def _hidden(form, name: str) -> str | None:
    for item in form.inputs:
        if item.get("name") == name:
            return item.get("value")
    return None


def _with_position(form: Form, position) -> Form:
    """The item form as the page's script leaves it after showing the next item in place."""
    inputs = [{**i, "value": str(position)} if i.get("name") == "position" else i for i in form.inputs]
    return dataclasses.replace(form, inputs=inputs)


_NEXT_STEP = re.compile(r'<script id="next-step" type="application/json">(.*?)</script>', re.S)
_FIRST_ITEM = re.compile(r'<script id="first-item" type="application/json">(.*?)</script>', re.S)


def _next_step(body: str, pattern: re.Pattern = _NEXT_STEP) -> dict | None:
    """The page of the step after this one that the page carries (the consent page carries the instructions:
    ratings/shared_pages.py `consent_page`), as participant.js reads it; None when it carries none. With
    `_FIRST_ITEM`: the first item it also carries (the item page's shell and the item)."""
    found = pattern.search(body)
    return json.loads(found.group(1)) if found else None


def _json_reply(exchange: Exchange) -> dict | None:
    if exchange.status != 200:
        return None
    try:
        reply = json.loads(exchange.body)
    except ValueError:
        return None
    return reply if isinstance(reply, dict) else None


class Recorder:
    """Thread-safe latency samples per (page kind, method) and status counts."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.samples: dict[str, list[float]] = {}
        self.statuses: dict[str, int] = {}
        self.first: float | None = None
        self.last: float | None = None
        self.events: list[tuple[float, str, str, int]] = []  # (monotonic end time, kind, method, status)

    def __call__(self, kind: str, method: str, status: int, seconds: float) -> None:
        now = time.monotonic()
        with self.lock:
            self.samples.setdefault(f"{kind} {method}", []).append(seconds)
            self.statuses[str(status)] = self.statuses.get(str(status), 0) + 1
            self.events.append((now, kind, method, status))
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
    in_place: bool = False,
) -> Outcome:
    """Entry → consent → instructions → (TEQ) → the rating pages → completion, as a person with a
    browser would: read, think, pick an option, press the affirmative button, follow the redirect.

    `in_place=False`: a browser without JavaScript (every answer a form POST and the redirected GET of the
    next item). `in_place=True`: what static/ratings/participant.js does: the step and item forms' fields
    posted with `Accept: application/json`, the next item or the next step's page read from the JSON reply
    (no page load), a `next` address followed as a normal navigation.

    An answer counts as acknowledged when its POST was answered with a redirect and the page that
    followed is no longer that item (the participant moved on), or (in place) when the JSON reply shows
    another item or sends the participant on: what a person takes as "saved"."""
    if completion_marker not in COMPLETION_MARKERS:
        COMPLETION_MARKERS.append(completion_marker)
    outcome = Outcome(external_id=external_id)
    browser = Browser(
        base_url, client_ip=client_ip, record=recorder, retry_seconds=retry_seconds, classify=page_kind
    )
    try:
        page = _get_following(browser, "entry", entry_path)
        page_forms = None  # the forms of `page`, when already parsed (each page is parsed once)
        agreed = False  # the consent agreed to and not yet posted (it goes with the next form posted)
        first_item = None  # the first item the consent page carried, shown when the instructions are done
        shown_at = None  # when that item was shown without a request: its answer says how long ago
        for _ in range(60):
            if completion_marker in page.body:
                outcome.completed = True
                break
            if page_forms is None:
                page_forms = parse_forms(page.body)
            forms = [f for f in page_forms if f.method == "post" and _hidden(f, "step")]
            if page.status != 200 or not forms:
                outcome.error = f"stuck at {page.path} (HTTP {page.status}): {_text_of(page.body)[:160]}"
                break
            form = forms[0]
            kind = page_kind(page.status, page.body)
            data, chosen = fill_form(form, rng)
            # A person reads, thinks and clicks: longer on rating pages than on consent or instructions.
            time.sleep(think_seconds * rng.uniform(0.5, 1.5) * (1.0 if kind == "rating" else 0.5))
            action = Browser.path_of(form.action or page.path, page.path)
            if in_place and form.in_place and kind == "instructions" and first_item is not None:
                # participant.js shows the first item the consent page carried: no request; the first answer
                # takes the consent and the instructions with it.
                page = _Page(Browser.path_of(first_item["url"], action), 200, first_item["page"])
                page_forms, first_item, shown_at = None, None, time.monotonic()
                outcome.pages += 1
                continue
            if in_place and form.in_place and kind == "rating" and shown_at is not None:
                data += [("begun", "1"), ("shown_ms", str(int((time.monotonic() - shown_at) * 1000)))]
                shown_at = None
            if in_place and form.in_place and agreed:
                data.append(("agreed", "1"))  # the consent agreed to without a request goes with this form
                agreed = False
            if in_place and form.in_place and kind == "consent" and ("decision", "agree") in data:
                ahead = _next_step(page.body)
                if ahead is not None:  # participant.js shows the instructions it carries: no request
                    first_item = _next_step(page.body, _FIRST_ITEM)
                    page = _Page(Browser.path_of(ahead["url"], action), 200, ahead["page"])
                    page_forms, agreed = None, True
                    outcome.pages += 1
                    continue
            if in_place and form.in_place:
                # What participant.js does: the form's fields posted in the background; the reply is the next
                # item (shown in place), the next step's page (shown in place) or an address to go to.
                posted = browser.request(
                    kind, "POST", action, data, referer=base_url + page.path, accept="application/json"
                )
                if posted.attempts > 1:
                    outcome.retried_posts += 1
                reply = _json_reply(posted)
                position = _hidden(form, "position")
                outcome.pages += 1
                if kind == "rating" and reply and "item" in reply:
                    if str(reply["item"]["position"]) != position:
                        outcome.acknowledged.append(
                            {"position": position, "value": next(iter(chosen.values()), None)}
                        )
                    page_forms = [_with_position(form, reply["item"]["position"])]
                    continue
                moved_on = bool(reply and (reply.get("next") or reply.get("page")))
                if kind == "rating" and moved_on and posted.status == 200:
                    outcome.acknowledged.append(
                        {"position": position, "value": next(iter(chosen.values()), None)}
                    )
                if reply and reply.get("page"):
                    page = _Page(
                        Browser.path_of(reply.get("url") or action, action), posted.status, reply["page"]
                    )
                elif reply and reply.get("next"):
                    page = _get_following(browser, None, Browser.path_of(reply["next"], action))
                else:
                    page = _Page(action, posted.status, posted.body)
                page_forms = None
                continue
            posted = browser.request(kind, "POST", action, data, referer=base_url + page.path)
            if posted.attempts > 1:
                outcome.retried_posts += 1
            if 300 <= posted.status < 400:
                following = _get_following(browser, None, Browser.path_of(posted.location, action))
            else:
                following = _Page(action, posted.status, posted.body)
            page_forms = None
            if kind == "rating" and 300 <= posted.status < 400:
                position = _hidden(form, "position")
                page_forms = parse_forms(following.body)
                moved_on = page_kind(following.status, following.body) != "rating" or position != next(
                    (_hidden(f, "position") for f in page_forms if _hidden(f, "step")), None
                )
                if moved_on:
                    outcome.acknowledged.append(
                        {"position": position, "value": next(iter(chosen.values()), None)}
                    )
            page = following
            outcome.pages += 1
    except TransportError as exc:
        outcome.error = f"gave up: {exc}"
    outcome.transport_errors = browser.errors
    return outcome


def _text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


@dataclass
class _Page:
    path: str
    status: int
    body: str


def _get_following(browser: Browser, kind: str | None, path: str) -> _Page:
    for _ in range(10):
        exchange: Exchange = browser.request(kind, "GET", path)
        kind = None
        if 300 <= exchange.status < 400 and exchange.location:
            if exchange.location.startswith("http") and not exchange.location.startswith(browser.origin):
                return _Page(exchange.location, 200, exchange.location)  # off to the recruiting platform
            path = Browser.path_of(exchange.location, path)
            continue
        return _Page(path, exchange.status, exchange.body)
    raise TransportError(f"too many redirects from {path}")


def run_wave(
    *,
    base_url: str,
    slug: str,
    participants: int,
    arrival_seconds: float,
    think_seconds: float,
    seed: int,
    id_prefix: str,
    completion_marker: str,
    retry_seconds: float = 60.0,
    progress=None,
    in_place: bool = False,
) -> tuple[Recorder, list[Outcome], float]:
    """`participants` people arriving at random moments within `arrival_seconds`, each on a thread of
    their own, each from a client address of their own. Returns when all have finished or given up."""
    recorder = Recorder()
    outcomes: list[Outcome] = []
    lock = threading.Lock()
    rng = random.Random(seed)
    starts = sorted(rng.uniform(0, arrival_seconds) for _ in range(participants))
    ids = [f"{id_prefix}{rng.getrandbits(64):016x}{i:04d}" for i in range(participants)]
    t0 = time.monotonic()

    def one(i: int) -> None:
        time.sleep(max(0.0, t0 + starts[i] - time.monotonic()))
        outcome = run_participant(
            base_url=base_url,
            entry_path=entry_path(slug, ids[i]),
            external_id=ids[i],
            client_ip=f"10.{seed % 200}.{i // 256 % 256}.{i % 256}",
            recorder=recorder,
            think_seconds=think_seconds,
            completion_marker=completion_marker,
            rng=random.Random(seed * 100_003 + i),
            retry_seconds=retry_seconds,
            in_place=in_place,
        )
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(participants)]
    for thread in threads:
        thread.start()
    last_report = time.monotonic()
    while any(t.is_alive() for t in threads):
        time.sleep(0.5)
        if progress and time.monotonic() - last_report > 15:
            last_report = time.monotonic()
            progress(f"{len(outcomes)}/{participants} finished, {recorder.requests} requests")
    return recorder, outcomes, time.monotonic() - t0


def entry_path(slug: str, external_id: str) -> str:
    """The study link as Prolific fills it in."""
    return f"/s/{slug}/?PROLIFIC_PID={external_id}&STUDY_ID=bench-study&SESSION_ID=s-{external_id}"
