"""Authenticity: how often the score flags people-like participants and agents, driven through the real
participant pages in headless Chromium, and what the signals add to an answer's server time.

    .venv/bin/python bench/authenticity.py [--per-kind 50] [--concurrency 4] [--compression 0.1] \
        [--no-cognitive-trap] [--latency-participants 60]

`--per-kind 0` runs the latency phase alone (below): a quick re-measure, e.g. on a quiet machine.

Prints ONE JSON object (progress on stderr). A throwaway production-shaped stack (bench/lib/stack.py: gunicorn,
its own PostgreSQL database and Redis database) serves a live rating study of the public dataset
(bench/lib/study.py) with the hidden instruction on, and the picture check (the cognitive trap) unless
`--no-cognitive-trap`. Three kinds of simulated participant, `--per-kind` each,
`--concurrency` browser contexts at a time, every one with a person's user agent and `navigator.webdriver`
hidden (as a careful agent hides them: the score must work on behaviour, not on a flag an agent can turn off):

* people: reading pauses, real input events through the DevTools protocol, a tab switch on about one page in
  ten. Three ways of answering, as people do: a mouse (moves along a path, then clicks), a phone's touch
  screen (taps, no hover at all) and a keyboard alone (Tab, Enter, the answer keys). Reading time per item is
  the item's words (situation, utterance, reply) at a reading speed drawn per person (lognormal, median
  238 words a minute: Brysbaert 2019's silent-reading average) plus a decision time (lognormal, median
  2.5 s). The published study gives no per-item times (its data have none, see
  /work/shared/data/llm-empathy-evaluation/SOURCE.md), only about 9-10 minutes per visit with its tutorial and
  questionnaire (docs/STUDIES.md); the pauses drawn here come to `reading.per_item_median_s` per item
  uncompressed.
* scripted agents: read the page's text (`innerText`) and answer through the DOM with no pointer or key
  event — half by `element.click()`, half by `form.requestSubmit(button)` — half at machine speed, half with
  random waits; each follows the hidden instruction it reads with probability `--follow` (0.5).
* pointer agents: read the page's text too, but move the mouse along a path and click through the DevTools
  protocol (trusted events) after the same reading pauses as people; they follow the hidden instruction with
  the same probability (typing the word with `fill`).

The picture check (one item page per participant, its instruction drawn as letter outlines): people see what it
asks (the bench asks the server for it, `studies.authenticity.picture_answer`, as a person reads it off the picture)
and answer it after a short look, but slip to another answer with probability `--people-slip` (0.041: Affonso
2026's Prolific participants failed its cognitive traps that often); scripted and pointer agents read the page's
text, which does not say, and pick an answer as on any item. Each kind's `picture` entry counts passed, failed and skipped, with the pass rate.

Time compression: every pause is multiplied by `--compression` (0.1) so the run fits in about ten minutes, and
the server's one timing threshold (AUTHENTICITY_FAST_PAGE_MS, 1500 ms) is multiplied by the same factor, so
compressed people are judged as uncompressed people would be. A tab switch in headless Chromium is seen by the
page as a window blur (`bl`), not as a visibility change.

Flag rates: `flag_rate` uses the score as stored; `flag_rate_behaviour_only` recomputes it without the hidden
instruction and the picture check (what the score sees when the study leaves both traps off);
`flag_rate_without_picture` without the picture check alone.

Added server latency per answer: after the browser phase, in this process against the same database, fresh
participants answer through the full Django stack (middleware, rate limiter, the step view) with Django's
test client — every other answer with the signals a person's page sends, every other without — and
`studies.authenticity.signals_record` (parse, store, score) is timed on each answer that carries them, with
the savepoint the answer then opens inside the signals' transaction (ratings.flow `signals_kept`: the signals
are stored in the answer's own transaction, with no commit of their own), in wall time and in this process's
CPU time (parsing, scoring, building the rows; PostgreSQL's is apart). The goal is its wall-time p99 below
5 ms; the answers' own server times with and without signals are reported beside it, and
the machine's load average after the phase (on a shared, overloaded machine every figure stretches alike).
The study has no consistency pairs (the simulated people answer at random, which no consistency check would
credit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lib.journey import percentiles  # noqa: E402
from bench.lib.stack import DEFAULT_CORPUS, Stack, log  # noqa: E402
from bench.lib.study import study_seed  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
DESKTOP_UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36"
PHONE_UA = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Mobile Safari/537.36"
NOT_DRIVEN = "Object.defineProperty(Navigator.prototype, 'webdriver', {get: () => false});"
SLUG = "authenticity"
FAST_PAGE_MS = 1500  # AUTHENTICITY_FAST_PAGE_MS's default, compressed with the pauses
WPM_MEDIAN, WPM_SIGMA = 238, 0.25
DECIDE_MEDIAN_S, DECIDE_SIGMA = 2.5, 0.5
ANSWERS = ("Good", "Okay", "Bad")
DONE = "Thank you, you have finished"
TRAP_PATTERN = r"type the word (\S+) into the confirmation field"


class Walker:
    """One simulated participant in its own browser context."""

    def __init__(self, kind: str, style: str, index: int, args, rng: random.Random):
        self.kind, self.style, self.index, self.args, self.rng = kind, style, index, args, rng
        self.pid = f"{kind}-{style}-{index:03d}"
        self.wpm = WPM_MEDIAN * math.exp(rng.gauss(0, WPM_SIGMA))
        self.follows = rng.random() < args.follow
        self.machine_speed = rng.random() < 0.5
        self.item_pauses: list[float] = []  # uncompressed seconds, people and pointer agents
        self.picture: str | None = None  # the answer given on the picture check: a scale label
        self.completed = False

    def address(self) -> str:
        """A network address of its own (the stack trusts one proxy: the per-address entry limit applies)."""
        kinds = ("people", "scripted", "pointer")
        return f"10.{kinds.index(self.kind) + 1}.{self.index // 250}.{self.index % 250 + 1}"

    async def pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds * self.args.compression)

    def reading_seconds(self, words: int) -> float:
        return words / self.wpm * 60 + DECIDE_MEDIAN_S * math.exp(self.rng.gauss(0, DECIDE_SIGMA))

    # --- moving like a person ------------------------------------------------------------------------------
    async def pointer_to(self, page, locator) -> None:
        box = await locator.bounding_box()
        x = box["x"] + box["width"] * self.rng.uniform(0.25, 0.75)
        y = box["y"] + box["height"] * self.rng.uniform(0.3, 0.7)
        if self.style == "touch":
            await page.touchscreen.tap(x, y)
            return
        await page.mouse.move(x, y, steps=self.rng.randint(8, 25))
        await page.mouse.click(x, y, delay=self.rng.randint(40, 120))

    async def tab_to(self, page, name: str) -> None:
        for _ in range(40):
            await page.keyboard.press("Tab")
            await asyncio.sleep(0.01)
            if name in await page.evaluate(
                "document.activeElement ? document.activeElement.textContent : ''"
            ):
                return
        raise RuntimeError(f"{self.pid}: Tab never reached {name!r}")

    async def press(self, page, name: str) -> None:
        """Presses the button named `name` the way this walker does."""
        if self.kind == "scripted":
            how = "click()" if self.style == "click" else "form.requestSubmit(b)"
            await page.evaluate(
                "([name, how]) => { const b = [...document.querySelectorAll('button')].find("
                "e => e.textContent.replace(/\\s+/g, ' ').trim().endsWith(name)); if (how === 'click()') { b.click(); } "
                "else { b.form.requestSubmit(b); } }",
                [name, how],
            )
        elif self.style == "keyboard":
            await self.tab_to(page, name)
            await page.keyboard.press(self.rng.choice(["Enter", " "]))
        else:
            await self.pointer_to(page, page.get_by_role("button", name=name, exact=True))

    async def tab_switch(self, page, context) -> None:
        """Another tab for a moment (seen by the page as a window blur in headless Chromium)."""
        cdp = await context.new_cdp_session(page)
        await cdp.send("Emulation.setFocusEmulationEnabled", {"enabled": False})
        other = await context.new_page()
        await other.bring_to_front()
        await self.pause(self.rng.uniform(3, 20))
        await page.bring_to_front()
        await other.close()
        await cdp.send("Emulation.setFocusEmulationEnabled", {"enabled": True})
        await cdp.detach()

    async def hidden_instruction(self, page) -> None:
        """An agent reads the page's text; if it finds the instruction, it may follow it."""
        if self.kind == "people" or not self.follows:
            return
        text = await page.evaluate("document.body.innerText")
        found = re.search(TRAP_PATTERN, text)
        if not found:
            return
        field = page.locator("input[name='confirm_word']")
        if self.kind == "scripted":
            await field.evaluate("(e, word) => { e.value = word; }", found.group(1))
        else:
            await field.fill(found.group(1), force=True)

    async def wait_heading(self, page, text: str) -> None:
        await page.wait_for_function(
            "t => { const h = document.querySelector('main h1'); return h && h.textContent.trim().startsWith(t); }",
            arg=text,
            timeout=30_000,
        )

    async def walk(self, browser, base_url: str) -> None:
        phone = self.style == "touch"
        context = await browser.new_context(
            viewport={"width": 390, "height": 844} if phone else {"width": 1280, "height": 800},
            is_mobile=phone,
            has_touch=phone,
            user_agent=PHONE_UA if phone else DESKTOP_UA,
            extra_http_headers={"X-Forwarded-For": self.address()},
        )
        await context.add_init_script(NOT_DRIVEN)
        page = await context.new_page()
        page.set_default_timeout(30_000)
        try:
            await page.goto(f"{base_url}/s/{SLUG}/?PROLIFIC_PID={self.pid}&STUDY_ID=S&SESSION_ID={self.pid}")
            await self.read_page(seconds=self.rng.uniform(8, 40))
            await self.hidden_instruction(page)
            await self.press(page, "I agree, start the study")
            await self.wait_heading(page, "Instructions")
            await self.read_page(seconds=self.rng.uniform(10, 60))
            await self.press(page, "I have read the instructions, continue")
            for number in range(1, 100):
                await self.wait_heading(page, f"Item {number} of")
                if await page.locator("svg.picture").count():
                    await self.picture_check(page)
                    heading = await self.next_heading(page, number)
                    if heading.startswith(DONE):
                        self.completed = True
                        return
                    continue
                words = await page.evaluate(
                    "['situation', 'utterance', 'response'].map(k => document.querySelector(`[data-${k}]`)"
                    ".textContent).join(' ').split(/\\s+/).length"
                )
                if self.kind != "scripted" or not self.machine_speed:
                    seconds = (
                        self.reading_seconds(words) if self.kind != "scripted" else self.rng.uniform(0.5, 5)
                    )
                    if self.kind != "scripted":
                        self.item_pauses.append(seconds)
                    if self.kind == "people" and self.rng.random() < 0.1:
                        await self.pause(seconds / 2)
                        await self.tab_switch(page, context)
                        await self.pause(seconds / 2)
                    else:
                        await self.read_while_moving(page, seconds)
                await self.hidden_instruction(page)
                answer = self.rng.choices(ANSWERS, weights=(5, 3, 2))[0]
                if self.style == "keyboard" and self.rng.random() < 0.6:
                    await page.keyboard.press(str(ANSWERS.index(answer) + 1))  # the shortcut keys
                else:
                    await self.press(page, answer)
                heading = await self.next_heading(page, number)
                if heading.startswith(DONE):
                    self.completed = True
                    return
        finally:
            await context.close()

    async def picture_check(self, page) -> None:
        """The picture check: a person answers what the picture asks after a look; an agent, which finds no
        answer in the page's text, picks one as on any item."""
        if self.kind == "people":
            answer = await asyncio.to_thread(picture_label, self.pid)
            if self.rng.random() < self.args.people_slip:  # a slip of the finger: another answer
                answer = self.rng.choice([label for label in ANSWERS if label != answer])
            await self.pause(self.reading_seconds(6))
        else:
            answer = self.rng.choices(ANSWERS, weights=(5, 3, 2))[0]
            if self.kind != "scripted" or not self.machine_speed:
                await self.read_while_moving(page, self.reading_seconds(6) if self.kind == "pointer" else 2)
        await self.hidden_instruction(page)
        self.picture = answer
        await self.press(page, answer)

    async def read_page(self, *, seconds: float) -> None:
        if self.kind == "scripted" and self.machine_speed:
            return
        await self.pause(seconds if self.kind != "scripted" else self.rng.uniform(0.5, 5))

    async def read_while_moving(self, page, seconds: float) -> None:
        """A pause, with a few idle pointer moves for a mouse user or a pointer agent."""
        if self.style not in ("mouse", "pointer"):
            await self.pause(seconds)
            return
        for _ in range(3):
            await page.mouse.move(self.rng.uniform(100, 1100), self.rng.uniform(100, 700), steps=5)
            await self.pause(seconds / 3)

    async def next_heading(self, page, number: int) -> str:
        for attempt in range(
            3
        ):  # the picture page comes and goes by a navigation, which may interrupt a wait
            try:
                await page.wait_for_function(
                    "([n, done]) => { const h = document.querySelector('main h1');"
                    " const t = h ? h.textContent.trim() : '';"
                    " return t.startsWith(done) || t.startsWith(`Item ${n + 1} of`); }",
                    arg=[number, DONE],
                    timeout=30_000,
                )
                return (await page.locator("main h1").text_content()).strip()
            except Exception as exc:
                if "context was destroyed" not in str(exc) or attempt == 2:
                    raise
                await page.wait_for_load_state()
        raise AssertionError("unreachable")


def picture_label(pid: str) -> str:
    """What the participant's picture asks for, as a person reads it off the picture (asked of the server)."""
    from django.db import connection

    from studies.authenticity import picture_answer
    from studies.models import Participant

    try:
        participant = Participant.objects.select_related("study").get(external_id=pid, study__slug=SLUG)
        return picture_answer(study=participant.study, participant_id=participant.pk)["label"]
    finally:
        connection.close()  # a worker thread's own connection


def walkers_make(args) -> list[Walker]:
    rng = random.Random(args.seed)
    styles = {
        "people": ["mouse", "touch", "keyboard"],
        "scripted": ["click", "requestsubmit"],
        "pointer": ["pointer"],
    }
    out = []
    for kind, kind_styles in styles.items():
        for i in range(args.per_kind):
            out.append(Walker(kind, kind_styles[i % len(kind_styles)], i, args, random.Random(rng.random())))
    rng.shuffle(out)  # the kinds interleaved, so they share the server's load alike
    return out


async def browser_phase(base_url: str, walkers: list[Walker], concurrency: int) -> dict[str, str]:
    from playwright.async_api import async_playwright

    errors: dict[str, str] = {}
    gate = asyncio.Semaphore(concurrency)
    done = [0]

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )

        async def one(walker: Walker) -> None:
            async with gate:
                try:
                    await walker.walk(browser, base_url)
                except Exception as exc:  # reported in the JSON; the run goes on
                    errors[walker.pid] = f"{type(exc).__name__}: {str(exc)[:200]}"
                done[0] += 1
                if done[0] % 15 == 0:
                    log(f"{done[0]}/{len(walkers)} walkers done")

        await asyncio.gather(*(one(w) for w in walkers))
        await browser.close()
    return errors


def flag_rates(walkers: list[Walker]) -> dict:
    from studies.authenticity import score_compute
    from studies.models import ParticipantAuthenticity

    rows = {
        row.participant.external_id: row
        for row in ParticipantAuthenticity.objects.filter(participant__study__slug=SLUG).select_related(
            "participant"
        )
    }
    out: dict = {}
    groups: dict[tuple[str, str], list[Walker]] = {}
    for walker in walkers:
        groups.setdefault((walker.kind, "all"), []).append(walker)
        groups.setdefault((walker.kind, walker.style), []).append(walker)
    for (kind, style), members in sorted(groups.items()):
        done = [w for w in members if w.completed]
        flagged = behaviour = without_picture = 0
        reasons: dict[str, int] = {}
        picture = {"passed": 0, "failed": 0, "skipped": 0}
        no_signals = 0
        for walker in done:
            row = rows.get(walker.pid)
            if row is None:
                no_signals += 1
                continue
            flagged += row.flagged
            pages = {k: {f: v for f, v in p.items() if f != "trap"} for k, p in row.pages.items()}
            behaviour += score_compute(client=row.client, pages=pages).flagged
            without_picture += score_compute(client=row.client, pages=row.pages, pairs=row.pairs).flagged
            if row.picture:
                picture[row.picture] += 1
            for reason in row.reasons:
                head = reason.split(":")[0].split(" on ")[0].split(" (-")[0]
                reasons[head] = reasons.get(head, 0) + 1
        n = len(done)
        entry = {
            "walkers": len(members),
            "completed": n,
            "flagged": flagged,
            "flag_rate": round(flagged / n, 3) if n else None,
            "flag_rate_behaviour_only": round(behaviour / n, 3) if n else None,
            "flag_rate_without_picture": round(without_picture / n, 3) if n else None,
            "picture": {
                **picture,
                "pass_rate": round(picture["passed"] / sum(picture.values()), 3)
                if any(picture.values())
                else None,
            },
            "no_signals": no_signals,
            "reasons": dict(sorted(reasons.items())),
        }
        out.setdefault(kind, {})[style] = entry
    return out


def latency_phase(participants: int) -> dict:
    """Answers through the full Django stack in this process, alternately with and without signals; the
    signals' own server cost timed on each answer that carries them: `signals_record` (parse, store, score),
    and the savepoint the answer's service then opens inside the signals' transaction (ratings.flow
    `signals_kept`), which an answer without signals does not pay."""
    from django.db import connections
    from django.test import Client

    import ratings.flow
    from studies import authenticity

    record = authenticity.signals_record
    costs: list[float] = []  # the answers' calls that carry signals: wall time
    cpu: list[float] = []  # and this process's CPU time (parsing, scoring, the ORM; not PostgreSQL's)

    spent = [0.0, 0.0]  # this answer's signals work so far: wall, CPU

    def timer(function):
        def timed(*args, **kwargs):
            started, started_cpu = time.perf_counter(), time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - started
                spent[1] += time.process_time() - started_cpu

        return timed

    ratings.flow.authenticity.signals_record = timer(record)
    connection = connections["default"]
    savepoints = {name: getattr(connection, name) for name in ("savepoint", "savepoint_commit")}
    sig = json.dumps(
        {"t": 14000, "fi": 450, "pm": 95, "pd": 1, "cl": 1, "c": {"au": [], "sw": 1280, "sh": 800, "mt": 0}}
    )
    with_signals, without = [], []
    stopped: list[str] = []
    try:
        for i in range(participants):
            client = Client(
                HTTP_HOST="127.0.0.1",
                HTTP_USER_AGENT=DESKTOP_UA,
                HTTP_X_FORWARDED_FOR=f"172.16.{i // 250}.{i % 250}",
            )
            # secure=True: this process's settings redirect plain http to https (the server's do not).
            entry = client.get(
                f"/s/{SLUG}/",
                {"PROLIFIC_PID": f"latency-{i:03d}", "STUDY_ID": "S", "SESSION_ID": "L"},
                secure=True,
            )
            url = f"/s/{SLUG}/step/"
            consent = client.post(url, {"step": "consent", "decision": "agree", "sig": sig}, secure=True)
            client.post(url, {"step": "instructions", "sig": sig}, secure=True)
            for n in range(100):
                page = client.get(url, secure=True).content.decode()
                marker = 'name="position" value="'
                if marker not in page:
                    if n == 0:  # never reached the items: say where it stopped
                        title = page.split("<title>", 1)[-1].split("</title>", 1)[0]
                        stopped.append(f"{entry.status_code}/{consent.status_code}: {title.strip()[:80]}")
                    break
                position = page.split(marker, 1)[1].split('"', 1)[0]
                data = {"step": "items", "position": position, "value": 3}
                carries = (i + n) % 2 == 0
                if carries:
                    data["sig"] = sig
                spent[:] = [0.0, 0.0]
                for name, function in savepoints.items():  # timed on this answer only: it is in the block
                    setattr(connection, name, timer(function) if carries else function)
                started = time.perf_counter()
                reply = client.post(url, data, HTTP_ACCEPT="application/json", secure=True)
                (with_signals if carries else without).append(time.perf_counter() - started)
                if carries:
                    costs.append(spent[0])
                    cpu.append(spent[1])
                if reply.status_code != 200:
                    raise RuntimeError(f"latency answer refused: {reply.status_code} {reply.content[:200]!r}")
    finally:
        ratings.flow.authenticity.signals_record = record
        for name in savepoints:
            connection.__dict__.pop(name, None)
    if not with_signals or not without:
        raise RuntimeError(f"the latency phase answered nothing: {stopped[:3]}")
    return {
        "answers_with_signals": len(with_signals),
        "answers_without_signals": len(without),
        "signals_record_per_answer": percentiles(costs),
        "signals_record_cpu_per_answer": percentiles(cpu),
        "load_average_1min_after": round(os.getloadavg()[0], 1),
        "answer_server_time_with_signals": percentiles(with_signals),
        "answer_server_time_without_signals": percentiles(without),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--per-kind", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--compression", type=float, default=0.1)
    parser.add_argument("--follow", type=float, default=0.5, help="an agent follows the hidden instruction")
    parser.add_argument(
        "--people-slip",
        type=float,
        default=0.041,
        help="a person answers the picture check otherwise than it asks (Affonso 2026: 4.1 %% of Prolific people)",
    )
    parser.add_argument("--latency-participants", type=int, default=60)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--cognitive-trap",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the picture check (one item page per participant; on by default)",
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/3")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args(argv)
    started = time.monotonic()
    fast_ms = max(1, round(FAST_PAGE_MS * args.compression))
    env = {"AUTHENTICITY_FAST_PAGE_MS": str(fast_ms), "RATELIMIT_PARTICIPANT": "600"}
    with Stack(workers=args.workers, redis_url=args.redis_url, extra_env=env, name="authenticity") as stack:
        stack.django_setup()
        from django.conf import settings

        from studies.models import Study

        settings.AUTHENTICITY_FAST_PAGE_MS = fast_ms  # this process recomputes scores too (flag_rates)
        settings.RATELIMIT_PARTICIPANT = 600
        settings.RATELIMIT_TRUSTED_PROXIES = 1  # as the server's: each latency client its own address
        seeded = study_seed(stack, slug=SLUG, corpus=args.corpus, ask_teq=False, quota_per_condition=1000)
        Study.objects.filter(slug=SLUG).update(trap_hidden_instruction=True, trap_picture=args.cognitive_trap)
        stack.start_server()
        walkers = walkers_make(args)
        log(f"{len(walkers)} walkers, {args.concurrency} at a time, pauses × {args.compression}")
        browser_started = time.monotonic()
        errors = asyncio.run(browser_phase(stack.base_url, walkers, args.concurrency)) if walkers else {}
        browser_seconds = time.monotonic() - browser_started
        rates = flag_rates(walkers)
        log(f"flag rates: {json.dumps({kind: groups['all'] for kind, groups in rates.items()})}")
        log("latency phase")
        try:
            latency = latency_phase(args.latency_participants)
        except Exception as exc:  # the browser phase's figures are still printed, with the error
            latency = {"error": f"{type(exc).__name__}: {exc}", "signals_record_per_answer": {}}
    pauses = [p for w in walkers for p in w.item_pauses]
    added_p99 = latency["signals_record_per_answer"].get("p99_ms")
    none = {"flag_rate": None, "flag_rate_behaviour_only": None, "picture": {"pass_rate": None}}
    people, scripted, pointer = (
        rates.get(kind, {}).get("all", none) for kind in ("people", "scripted", "pointer")
    )
    result = {
        "must_show": {
            "people_flag_rate": people["flag_rate"],
            "scripted_flag_rate": scripted["flag_rate"],
            "pointer_agent_flag_rate": pointer["flag_rate"],
            "pointer_agent_flag_rate_behaviour_only": pointer["flag_rate_behaviour_only"],
            "picture_pass_rate": {
                kind: groups["all"]["picture"]["pass_rate"] for kind, groups in rates.items()
            },
            "added_server_ms_per_answer_p99": added_p99,
        },
        "goals": {
            "people_flag_rate_le_0_05": people["flag_rate"] is not None and people["flag_rate"] <= 0.05,
            "scripted_flag_rate_ge_0_95": scripted["flag_rate"] is not None and scripted["flag_rate"] >= 0.95,
            "added_latency_p99_lt_5_ms": added_p99 is not None and added_p99 < 5,
        },
        "kinds": rates,
        "walker_errors": errors,
        "latency": latency,
        "reading": {
            "compression": args.compression,
            "fast_page_ms_threshold_used": fast_ms,
            "per_item_median_s": round(statistics.median(pauses), 1) if pauses else None,
            "per_item_p90_s": round(sorted(pauses)[int(0.9 * len(pauses))], 1) if pauses else None,
            "wpm_median": WPM_MEDIAN,
            "follow_hidden_instruction_probability": args.follow,
            "people_picture_slip_probability": args.people_slip,
            "cognitive_trap": args.cognitive_trap,
        },
        "setup": {
            "study": seeded,
            "per_kind": args.per_kind,
            "concurrency": args.concurrency,
            "gunicorn_workers": args.workers,
            "browser_seconds": round(browser_seconds, 1),
            "total_seconds": round(time.monotonic() - started, 1),
        },
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
