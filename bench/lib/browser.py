"""A browser-like HTTP client for one simulated participant: keeps cookies, follows redirects, reads the
page's POST form (CSRF token and hidden fields included, exactly as a browser submits it), and retries
on 5xx or a dropped connection the way a person presses reload (resubmitting the same form).
"""

from __future__ import annotations

import http.client
import random
import re
import time
import urllib.parse
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.cookies import SimpleCookie

AFFIRMATIVE = ("agree", "consent", "yes", "continue", "next", "start", "submit", "begin", "accept", "save")
# Read off a page with a regular expression by the benchmarks that post the step forms themselves, as
# participant.js does, instead of parsing them (bench/request_costs.py, bench/participant_split.py).
TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
POSITION = re.compile(r'name="position" value="(\d+)"')
HONEYPOT = "contact_me_by_fax_only"  # config.ratelimit.HONEYPOT_FIELD: sent empty, as by a person


def step_fields(page: str) -> dict[str, str]:
    """The fields every step form of `page` posts besides its own: the CSRF token and the empty honeypot."""
    return {"csrfmiddlewaretoken": TOKEN.search(page).group(1), HONEYPOT: ""}


NEGATIVE = ("decline", "disagree", "withdraw", "return", "no_", "not ", "leave", "quit", "back")


@dataclass
class Form:
    action: str
    method: str
    inputs: list[dict] = field(default_factory=list)
    buttons: list[dict] = field(default_factory=list)
    # Posted in the background by static/ratings/participant.js (`data-in-place` / `data-step-form`).
    in_place: bool = False


class FormParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[Form] = []
        self._current: Form | None = None
        self._button: dict | None = None
        self._textarea: dict | None = None
        self._select: dict | None = None

    def handle_starttag(self, tag, attrs):
        attributes = {name: (value if value is not None else "") for name, value in attrs}
        if tag == "form":
            self._current = Form(
                action=attributes.get("action", ""),
                method=attributes.get("method", "get").lower(),
                in_place="data-in-place" in attributes or "data-step-form" in attributes,
            )
            self.forms.append(self._current)
        elif self._current is None:
            return
        elif tag == "input":
            kind = attributes.get("type", "text").lower()
            if kind in {"submit", "image"}:
                self._current.buttons.append({**attributes, "text": attributes.get("value", "")})
            else:
                self._current.inputs.append({**attributes, "type": kind})
        elif tag == "button":
            self._button = {**attributes, "text": ""}
        elif tag == "textarea":
            self._textarea = {**attributes, "type": "textarea", "value": ""}
        elif tag == "select":
            self._select = {**attributes, "type": "select", "options": []}
        elif tag == "option" and self._select is not None:
            self._select["options"].append(attributes.get("value", ""))

    def handle_data(self, data):
        if self._button is not None:
            self._button["text"] += data

    def handle_endtag(self, tag):
        if self._current is None:
            return
        if tag == "button" and self._button is not None:
            if self._button.get("type", "submit").lower() == "submit":
                self._current.buttons.append(self._button)
            self._button = None
        elif tag == "textarea" and self._textarea is not None:
            self._current.inputs.append(self._textarea)
            self._textarea = None
        elif tag == "select" and self._select is not None:
            self._current.inputs.append(self._select)
            self._select = None
        elif tag == "form":
            self._current = None


# A form's own markup (forms do not nest in HTML).
_FORM = re.compile(r"<form\b.*?</form\s*>", re.IGNORECASE | re.DOTALL)


def parse_forms(html: str) -> list[Form]:
    """The page's forms. Only their own markup is parsed, which is all the parser reads: a browser parses a
    page natively, while this Python parser shares the machine's cores with the server under test (parsing
    whole pages, the in-place flow's clients used 0.453 ms of CPU a request against 0.422, alternated in one
    run). A page whose forms are not closed is parsed whole."""
    parser = FormParser()
    regions = _FORM.findall(html)
    if len(regions) != html.lower().count("<form"):
        regions = [html]
    for region in regions:
        parser.feed(region)
    parser.close()
    return parser.forms


def _score_button(button: dict) -> int:
    words = " ".join(str(button.get(k, "")) for k in ("name", "value", "text")).lower()
    if any(word in words for word in NEGATIVE):
        return -1
    return 1 if any(word in words for word in AFFIRMATIVE) else 0


def fill_form(form: Form, rng: random.Random, *, choose=None) -> tuple[list[tuple[str, str]], dict]:
    """What a cooperative participant submits: hidden fields as they are, one option of every radio
    group (`choose(name, values)` picks, default random), every checkbox ticked (consent), the first option
    of every select, empty text fields (the honeypot stays empty), and the affirmative submit button."""
    data: list[tuple[str, str]] = []
    radios: dict[str, list[str]] = {}
    for item in form.inputs:
        name = item.get("name")
        if not name:
            continue
        kind = item["type"]
        if kind == "radio":
            radios.setdefault(name, []).append(item.get("value", "on"))
        elif kind == "checkbox":
            data.append((name, item.get("value", "on") or "on"))
        elif kind == "select":
            options = [o for o in item["options"] if o]
            if options:
                data.append((name, options[0]))
        elif kind in {"hidden", "text", "textarea", "email", "number", "search", "url"}:
            data.append((name, item.get("value", "")))
    chosen = {}
    for name, values in radios.items():
        value = choose(name, values) if choose else rng.choice(values)
        chosen[name] = value
        data.append((name, value))
    named = [b for b in form.buttons if b.get("name")]
    if named:
        scores = [_score_button(b) for b in named]
        if len(set(scores)) > 1:  # e.g. "I agree" vs "I do not agree": the affirmative one
            pressed = named[scores.index(max(scores))]
        else:  # answer buttons (Good / Okay / Bad): the participant's opinion
            values = [b.get("value", "") for b in named]
            value = choose(named[0]["name"], values) if choose else rng.choice(values)
            pressed = named[values.index(value)]
            chosen[pressed["name"]] = value
        data.append((pressed["name"], pressed.get("value", "")))
    return data, chosen


@dataclass
class Exchange:
    method: str
    path: str
    status: int
    seconds: float
    attempts: int
    location: str = ""
    body: str = ""


class TransportError(Exception):
    pass


class Browser:
    def __init__(
        self,
        base_url: str,
        *,
        client_ip: str,
        record,
        retry_seconds: float = 60.0,
        timeout: float = 30.0,
        classify=None,
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        self.host, self.port = parts.hostname, parts.port
        self.origin = base_url.rstrip("/")
        self.cookies: dict[str, str] = {}
        self.client_ip = client_ip
        self.record = record  # record(kind, method, status, seconds) for latency statistics
        self.retry_seconds = retry_seconds
        self.timeout = timeout
        self.errors: list[str] = []
        self.classify = classify  # classify(body) -> page kind, for requests made with kind=None

    def _once(
        self, method: str, path: str, body: bytes | None, referer: str | None, accept: str = "text/html"
    ) -> tuple[int, dict, str]:
        headers = {
            "Host": f"{self.host}:{self.port}",
            "User-Agent": "bench-participant/1.0",
            "Accept": accept,
            "X-Forwarded-For": self.client_ip,
        }
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            headers["Origin"] = self.origin
        if referer:
            headers["Referer"] = referer
        connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read().decode("utf-8", "replace")
            set_cookies = response.headers.get_all("Set-Cookie") or []
            location = response.headers.get("Location", "")
        finally:
            connection.close()
        for raw in set_cookies:
            cookie = SimpleCookie()
            cookie.load(raw)
            for key, morsel in cookie.items():
                if morsel["max-age"] == "0" or morsel.value == "":
                    self.cookies.pop(key, None)
                else:
                    self.cookies[key] = morsel.value
        return response.status, {"Location": location}, text

    def request(
        self,
        kind: str | None,
        method: str,
        path: str,
        data=None,
        referer: str | None = None,
        accept: str = "text/html",
    ) -> Exchange:
        """One request, retried on 5xx, 429 (after Retry-After) and connection errors, like a person
        pressing reload (or the item page's script its "send my answer again"), for up to `retry_seconds`.
        Each attempt's latency is recorded. `accept="application/json"`: the item page's background post."""
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        deadline = time.monotonic() + self.retry_seconds
        attempts = 0
        while True:
            attempts += 1
            started = time.perf_counter()
            try:
                status, headers, text = self._once(method, path, body, referer, accept)
            except (OSError, http.client.HTTPException) as exc:
                elapsed = time.perf_counter() - started
                self.record(kind or "unknown", method, 0, elapsed)
                self.errors.append(f"{method} {kind}: {type(exc).__name__}")
                if time.monotonic() > deadline:
                    raise TransportError(f"{method} {path}: {exc}") from exc
                time.sleep(0.5 + random.random())
                continue
            elapsed = time.perf_counter() - started
            self.record(
                kind or (self.classify(status, text) if self.classify else "other"), method, status, elapsed
            )
            if status >= 500 or status == 429:
                self.errors.append(f"{method} {kind}: HTTP {status}")
                if time.monotonic() > deadline:
                    return Exchange(method, path, status, elapsed, attempts, headers["Location"], text)
                time.sleep(0.5 + random.random())
                continue
            return Exchange(method, path, status, elapsed, attempts, headers["Location"], text)

    @staticmethod
    def path_of(url: str, current: str) -> str:
        joined = urllib.parse.urljoin("http://x" + current, url)
        parts = urllib.parse.urlsplit(joined)
        return parts.path + (f"?{parts.query}" if parts.query else "")
