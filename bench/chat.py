"""Live conversations at scale: many chat participants at once against a loopback streaming provider, on the
production shape. Prints ONE JSON object (progress on stderr).

    .venv/bin/python bench/chat.py [--conversations 200] [--workers 2] [--arrival-seconds 2.5]

The shape (bench/lib/stack.py): DJANGO_ENV=production, a PostgreSQL database of its own, Redis, gunicorn with
`--workers` uvicorn (ASGI) workers serving config/asgi.py as docker-compose does. The study is `chat-demo` (seeded
by kinds/chat/demo.py) with its model and fallback pointed at the loopback provider and no minimum wait.

The provider (an asyncio server in this process, OpenAI's streamed chat completions): 1 s to the first token,
then 30 tokens a second (`--tokens` tokens), usage in the last event. It timestamps each request's arrival and
first token, so its own time to first token is measured in the same run as the participants'.

Participants are HTTP clients without a browser (httpx, a cookie jar each, an address of their own in
X-Forwarded-For): the study link, consent, the opening, then one message whose reply they read as the page's
script does (a POST asking for application/x-ndjson, read line by line). A stream that ends without its reply (a
dropped connection, a "failed" line) is resumed as the page does (action=resume) until the reply is there.

Phases:
1. `--conversations` at once (arrivals spread over `--arrival-seconds`, so every stream is open together): time to
   first token seen by the participant minus the provider's own for the same call (the platform's addition),
   p50/p95; the web workers' memory (RSS) idle and at the peak, per open conversation.
2. Faults: as many again while the provider drops 5 % of its streams mid-way and one web worker is killed
   (SIGKILL) mid-stream: turns lost (a message with no reply stored) and doubled (two replies, or a message stored
   twice) over every conversation.
3. A rush on the budget: the study's chat settings given a budget (`budget_usd`) with room for `--budget-calls`
   calls' maximum, and 3× as many participants at once, through the real path (enrolment holds the design's budget
   in generation's StudyBudget; every call reserves its maximum before it is sent and settles after; a reply the
   budget cannot cover is the fallback's, or the conversation is closed politely): what was spent against the cap
   and one call's maximum, how many were answered and how many closed, and whether a newcomer then gets the
   study's "full" page.
Then the label × source balance over every conversation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lib.journey import entry_path, percentiles  # noqa: E402
from bench.lib.stack import Stack, log  # noqa: E402

NDJSON = "application/x-ndjson"
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
_STEP = re.compile(r'name="step" value="([^"]+)"')
_MARK = re.compile(r"\[c(\d+)\]")


class LoopbackProvider:
    """OpenAI's streamed chat completions on a loopback port, on its own event loop in a thread."""

    def __init__(self, *, first_token: float = 1.0, per_second: float = 30.0, tokens: int = 60) -> None:
        self.first_token, self.per_second, self.tokens = first_token, per_second, tokens
        self.drop_share = 0.0
        self.rng = random.Random(7)
        self.calls: list[dict] = []  # {"mark", "received", "first", "dropped"}
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=4096))
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
                body = json.loads(await reader.readexactly(length))
                if not await self._answer(body, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, AttributeError):
            pass
        finally:
            writer.close()

    async def _answer(self, body: dict, writer: asyncio.StreamWriter) -> bool:
        received, received_wall = time.monotonic(), time.time()
        mark = _MARK.search(json.dumps(body.get("messages", [])))
        call = {"mark": int(mark.group(1)) if mark else None, "received": received, "first": None,
                "received_wall": received_wall, "first_wall": None, "dropped": False}  # fmt: skip
        self.calls.append(call)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        drop_at = self.rng.randrange(1, self.tokens) if self.rng.random() < self.drop_share else None
        await asyncio.sleep(self.first_token)
        base = {"id": f"chatcmpl-{len(self.calls)}", "object": "chat.completion.chunk", "created": 1,
                "model": "loopback-1"}  # fmt: skip
        for n in range(self.tokens):
            if n == drop_at:
                call["dropped"] = True
                writer.transport.abort()
                return False
            delta = {"index": 0, "delta": {"content": f"w{n} "}, "finish_reason": None}
            await self._event(writer, {**base, "choices": [delta]})
            if call["first"] is None:
                call["first"], call["first_wall"] = time.monotonic(), time.time()
            await asyncio.sleep(1 / self.per_second)
        await self._event(writer, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        usage = {"prompt_tokens": 60, "completion_tokens": self.tokens, "total_tokens": 60 + self.tokens}
        await self._event(writer, {**base, "choices": [], "usage": usage})
        data = b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
        await writer.drain()
        return True

    async def _event(self, writer, event: dict) -> None:
        data = f"data: {json.dumps(event)}\n\n".encode()
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await writer.drain()


# --- the study ----------------------------------------------------------------------------------------------


def seed(provider_port: int) -> tuple[str, int]:
    """chat-demo with its conditions on the loopback provider, its person source closed to enrolment (the bench
    measures the model's path: no responder answers); (slug, study id)."""
    from generation.models import LLMConditionConfig, Provider
    from kinds.chat.demo import PERSON, chat_demo_create
    from kinds.chat.models import ChatSettings

    study = chat_demo_create()
    study.conditions.filter(name=PERSON).update(enrolling=False)
    provider = Provider.objects.create(
        name="loopback", kind="openai", base_url=f"http://127.0.0.1:{provider_port}/v1", api_key_env="",
        max_concurrency=2000, requests_per_minute=1_000_000, tokens_per_minute=1_000_000_000, timeout_seconds=20,
        price_input_per_million="2.5", price_output_per_million="10",
    )  # fmt: skip
    LLMConditionConfig.objects.filter(condition__study=study).update(provider=provider, model="loopback-1")
    ChatSettings.objects.filter(study=study).update(min_reply_wait_ms=0)
    type(study).objects.filter(pk=study.pk).update(quota_per_condition=100_000)
    return study.slug, study.pk


# --- a participant ------------------------------------------------------------------------------------------


class Participant:
    def __init__(self, base_url: str, slug: str, n: int) -> None:
        import httpx2

        self.n, self.slug = n, slug
        headers = {"X-Forwarded-For": f"10.{n // 60000}.{n // 250 % 240}.{n % 250 + 1}", "Origin": base_url,
                   "Referer": f"{base_url}/s/{slug}/step/"}  # fmt: skip
        # Production marks its cookies Secure; over the loopback's plain HTTP they are kept by hand, as
        # bench/lib/browser.py does.
        self.jar: dict[str, str] = {}
        hooks = {"request": [self._cookies_send], "response": [self._cookies_keep]}
        self.client = httpx2.AsyncClient(
            base_url=base_url, headers=headers, timeout=120, follow_redirects=True, event_hooks=hooks
        )
        self.sent = self.first_chunk = self.done = None
        self.sent_wall = self.first_chunk_wall = None
        self.resumes = 0
        self.failed_lines = 0
        self.closed = (
            False  # the page was sent elsewhere ({"go": true}): the platform closed the conversation
        )
        self.refusals: Counter = Counter()

    async def _cookies_send(self, request) -> None:
        if self.jar:
            request.headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.jar.items())

    async def _cookies_keep(self, response) -> None:
        from http.cookies import SimpleCookie

        for raw in response.headers.get_list("set-cookie"):
            cookie = SimpleCookie()
            cookie.load(raw)
            for key, morsel in cookie.items():
                if morsel.value and morsel["max-age"] != "0":
                    self.jar[key] = morsel.value
                else:
                    self.jar.pop(key, None)

    async def _post(self, page: str, **data) -> str:
        token = _CSRF.search(page).group(1)
        step = _STEP.search(page).group(1)
        response = await self.client.post(
            f"/s/{self.slug}/step/", data={"csrfmiddlewaretoken": token, "step": step, **data}
        )
        return response.text

    async def ready(self) -> str:
        """The study link, then each page's form as a participant fills it, up to the conversation."""
        page = (await self.client.get(entry_path(self.slug, f"CHATBENCH{self.n}"))).text
        for _ in range(6):
            if 'name="message"' in page:
                return page
            if _CSRF.search(page) is None:
                break
            if 'name="decision"' in page:
                page = await self._post(page, decision="agree")
            elif 'name="opening"' in page:
                page = await self._post(page, opening="corpus")
            else:
                page = await self._post(page)
        raise RuntimeError(
            f"participant {self.n} did not reach the conversation (cookies {sorted(self.jar)}): {_text(page)[:300]}"
        )

    async def talk(self, page: str, deadline: float) -> None:
        token = _CSRF.search(page).group(1)
        data = {"csrfmiddlewaretoken": token, "step": "chat_talk", "action": "send",
                "message": _message(self.n)}  # fmt: skip
        self.sent, self.sent_wall = time.monotonic(), time.time()
        while self.done is None and not self.closed and time.monotonic() < deadline:
            try:
                async with self.client.stream(
                    "POST", f"/s/{self.slug}/step/", data=data, headers={"Accept": NDJSON}
                ) as response:
                    if response.status_code != 200 or "ndjson" not in response.headers.get(
                        "content-type", ""
                    ):
                        self.refusals[f"{response.status_code} {_text(await response.aread())[:120]}"] += 1
                    async for line in response.aiter_lines():
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        if "chunk" in event and self.first_chunk is None:
                            self.first_chunk, self.first_chunk_wall = time.monotonic(), time.time()
                        if "failed" in event:
                            self.failed_lines += 1
                        if "done" in event:
                            self.done = time.monotonic()
                        if event.get("go"):
                            self.closed = True
            except Exception as exc:  # a dropped connection (a killed worker): the page resumes
                self.refusals[type(exc).__name__] += 1
            if self.done is None and not self.closed:
                self.resumes += 1
                data = {"csrfmiddlewaretoken": token, "step": "chat_talk", "action": "resume"}
                await asyncio.sleep(1.0)

    async def close(self) -> None:
        await self.client.aclose()


def _message(n: int) -> str:
    return f"My exam went badly today and I feel awful [c{n}]"


async def _newcomer_page(base_url: str, slug: str) -> str:
    """What a new participant's study link shows: "full" (the study's full page) or "admitted"."""
    import httpx2

    async with httpx2.AsyncClient(base_url=base_url, follow_redirects=True, timeout=30,
                                  headers={"X-Forwarded-For": "10.250.0.1"}) as client:  # fmt: skip
        page = (await client.get(entry_path(slug, "CHATBENCH-NEWCOMER"))).text
    return "full" if "All places are taken" in page else "admitted"


async def wave(base_url, slug, ns, *, arrival: float, deadline_s: float, during=None) -> list[Participant]:
    people = [Participant(base_url, slug, n) for n in ns]
    arriving = asyncio.Semaphore(20)  # people open the link over a few seconds, not in the same millisecond

    async def ready(p):
        async with arriving:
            return await p.ready()

    pages = await asyncio.gather(*(ready(p) for p in people))
    log(f"{len(people)} participants at the conversation; their messages go out over {arrival:g}s")
    deadline = time.monotonic() + deadline_s

    async def one(p, page, delay):
        await asyncio.sleep(delay)
        await p.talk(page, deadline)

    tasks = [
        one(p, page, arrival * i / len(people)) for i, (p, page) in enumerate(zip(people, pages, strict=True))
    ]
    if during is not None:
        tasks.append(during(people))
    await asyncio.gather(*tasks)
    for p in people:
        await p.close()
    return people


# --- measures -----------------------------------------------------------------------------------------------


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def rss_kb(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def turns_check(study_id: int) -> dict:
    """Over every conversation: participant messages with no complete reply (lost), with two, or stored twice."""
    from django.db.models import Count

    from kinds.chat.models import Conversation, Turn

    lost = doubled = 0
    for conversation in Conversation.objects.filter(participant__study_id=study_id).annotate(
        n=Count("turns")
    ):
        turns = list(conversation.turns.order_by("index"))
        texts = Counter(t.text for t in turns if t.role == Turn.Role.PARTICIPANT)
        doubled += sum(c - 1 for c in texts.values())
        for i, turn in enumerate(turns):
            if turn.role != Turn.Role.PARTICIPANT:
                continue
            replies = [t for t in turns[i + 1 : i + 3] if t.role == Turn.Role.RESPONDER]
            complete = [t for t in replies[:1] if t.status == Turn.Status.COMPLETE]
            lost += not complete
        responders = [t for t in turns if t.role == Turn.Role.RESPONDER]
        participants = [t for t in turns if t.role == Turn.Role.PARTICIPANT]
        doubled += max(0, len(responders) - len(participants))
    return {"lost": lost, "doubled": doubled}


def ttft_phases(study_id: int, people: list[Participant], calls: list[dict]) -> dict:
    """Where a participant's time to first token goes, per conversation, from the clocks of the participant (this
    process), the server (the rows it stored) and the provider (this process): p50/p95 of each phase."""
    from kinds.chat.models import Turn

    replies = {}
    for turn in Turn.objects.filter(
        conversation__participant__study_id=study_id, role=Turn.Role.RESPONDER
    ).select_related("live_call"):
        replies[turn.conversation_id, turn.index] = turn
    by_mark = {c["mark"]: c for c in calls if c["first_wall"] is not None}
    phases: dict[str, list[float]] = {
        "sent_to_stored": [],  # the POST's arrival, its queue for the process's turns, the view
        "stored_to_call_started": [],  # the stream's steps before the call: lease, attempt, budget, limiter
        "call_started_to_provider": [],  # the SDK's request reaching the provider
        "provider_first_to_stored_first": [],  # the first token back through the SDK
        "stored_first_to_participant": [],  # the chunk through the stream to the participant
    }
    for turn in Turn.objects.filter(conversation__participant__study_id=study_id, role=Turn.Role.PARTICIPANT):
        mark = _MARK.search(turn.text)
        n = int(mark.group(1)) if mark else None
        person = next((p for p in people if p.n == n), None)
        reply = replies.get((turn.conversation_id, turn.index + 1))
        call = by_mark.get(n)
        if person is None or person.first_chunk_wall is None or reply is None or call is None:
            continue
        if reply.live_call is None or reply.first_token_at is None:
            continue
        stored, started = turn.sent_at.timestamp(), reply.live_call.started_at.timestamp()
        phases["sent_to_stored"].append(stored - person.sent_wall)
        phases["stored_to_call_started"].append(started - stored)
        phases["call_started_to_provider"].append(call["received_wall"] - started)
        phases["provider_first_to_stored_first"].append(reply.first_token_at.timestamp() - call["first_wall"])
        phases["stored_first_to_participant"].append(
            person.first_chunk_wall - reply.first_token_at.timestamp()
        )
    return {name: percentiles(values) for name, values in phases.items()}


def screen_figures(tokens: int) -> dict:
    """What checking a model's reply while it streams costs with no moderation provider (kinds/chat/safety.py
    ReplyScreen on the crisis-term list): its CPU a token against the baseline of only collecting the tokens,
    both measured here, and how many tokens it held back (a held first token is time to first token added), on
    the loopback provider's replies and on every reply the test model writes, cut into words as it streams."""
    import itertools
    import timeit

    from generation.providers.placeholder import CLOSINGS, MIDDLES, OPENINGS
    from kinds.chat.safety import ReplyScreen

    replies = {
        "loopback": [[f"w{n} " for n in range(tokens)]],
        "test_model": [
            re.findall(r"\S+\s*", " ".join(parts)) for parts in itertools.product(OPENINGS, MIDDLES, CLOSINGS)
        ],
    }
    figures = {}
    for name, cut in replies.items():
        count = sum(len(words) for words in cut)

        def screened(cut=cut):
            for words in cut:
                screen = ReplyScreen()
                for word in words:
                    screen.add(word)

        def collected(cut=cut):
            for words in cut:
                held: list[str] = []
                for word in words:
                    held.append(word)

        screen_s = min(timeit.repeat(screened, number=5, repeat=5)) / 5
        baseline_s = min(timeit.repeat(collected, number=5, repeat=5)) / 5
        held = first_held = 0
        for words in cut:
            screen = ReplyScreen()
            shown = [screen.add(word) for word in words]
            held += sum(1 for word, out in zip(words, shown, strict=True) if out != word)
            first_held += shown[0] == ""
        figures[name] = {
            "replies": len(cut),
            "tokens": count,
            "screen_us_per_token": round(screen_s / count * 1e6, 2),
            "baseline_collect_us_per_token": round(baseline_s / count * 1e6, 2),
            "tokens_held_back": held,
            "first_tokens_held_back": first_held,
        }
    return figures


def load_average() -> list[float]:
    return [round(x, 1) for x in os.getloadavg()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=200, help="participants a phase (200)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn uvicorn workers (2)")
    parser.add_argument(
        "--arrival-seconds",
        type=float,
        default=2.5,
        help="first messages spread over this many seconds (2.5)",
    )
    parser.add_argument("--tokens", type=int, default=60, help="tokens a loopback reply (60)")
    parser.add_argument("--budget-calls", type=int, default=20, help="the budget rush's room, in calls (20)")
    parser.add_argument("--phase1-only", action="store_true", help="skip the faults and the budget rush")
    args = parser.parse_args()
    provider = LoopbackProvider(tokens=args.tokens)
    env = {"PROVIDER_URL_ALLOWLIST": "127.0.0.1/32"}
    with Stack(
        workers=args.workers,
        name="chat",
        redis_url=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/2"),
        extra_env=env,
    ) as stack:
        stack.django_setup()
        slug, study_id = seed(provider.port)
        stack.start_server(asgi=True)
        workers = stack.worker_pids()
        idle = rss_kb(workers)
        peak = [idle]
        loads = [load_average()]
        n = args.conversations

        async def phase1():
            sampling = True

            async def sample():
                while sampling:
                    peak.append(rss_kb(workers))
                    if len(peak) % 10 == 0:
                        loads.append(load_average())
                    await asyncio.sleep(0.1)

            sampler = asyncio.create_task(sample())
            people = await wave(stack.base_url, slug, range(n), arrival=args.arrival_seconds, deadline_s=120)
            sampling = False
            await sampler
            return people

        # Each worker's first conversation imports the provider's SDK and opens its client: not measured.
        asyncio.run(
            wave(stack.base_url, slug, range(10**6, 10**6 + 4 * args.workers), arrival=0.5, deadline_s=60)
        )
        provider.calls.clear()
        people = asyncio.run(phase1())
        if os.environ.get("BENCH_CHAT_LOG"):
            Path(os.environ["BENCH_CHAT_LOG"]).write_bytes(stack.log_path.read_bytes())
        by_mark = {c["mark"]: c for c in provider.calls if c["first"] is not None}
        added = [
            (p.first_chunk - p.sent) - (by_mark[p.n]["first"] - by_mark[p.n]["received"])
            for p in people
            if p.first_chunk is not None and p.n in by_mark
        ]
        own = [c["first"] - c["received"] for c in by_mark.values()]
        open_at_once = max(
            sum(1 for p in people if p.sent <= t and (p.done or t + 1) > t) for t in (p.sent for p in people)
        )
        log(f"phase 1: {sum(p.done is not None for p in people)}/{n} replies; peak RSS {max(peak)} kB")
        phase1 = {
            "conversations": n,
            "open_at_once": open_at_once,
            "replies_complete": sum(p.done is not None for p in people),
            "platform_added_ttft_ms": percentiles(added),
            "participant_ttft_ms": percentiles(
                [p.first_chunk - p.sent for p in people if p.first_chunk is not None]
            ),
            "ttft_phases_ms": ttft_phases(study_id, people, provider.calls),
            "load_average_1min_during": {"min": min(x[0] for x in loads), "max": max(x[0] for x in loads)},
            "web_rss_kb_idle": idle,
            "web_rss_kb_peak": max(peak),
            "rss_kb_per_open_conversation": round((max(peak) - idle) / max(open_at_once, 1), 1),
        }
        if args.phase1_only:
            print(json.dumps({"bench": "chat", "provider_own_ttft_ms": percentiles(own), "phase1": phase1,
                              "reply_screen": screen_figures(args.tokens)}, indent=2))  # fmt: skip
            return

        provider.drop_share = 0.05

        async def kill_one(_people):
            await asyncio.sleep(args.arrival_seconds + 1.5)  # every stream under way
            victim = stack.worker_pids()[0]
            log(f"killing web worker {victim} mid-stream")
            os.kill(victim, signal.SIGKILL)

        calls_before = len(provider.calls)
        faulted = asyncio.run(
            wave(stack.base_url, slug, range(n, 2 * n), arrival=args.arrival_seconds, deadline_s=150,
                 during=kill_one)
        )  # fmt: skip
        dropped = sum(c["dropped"] for c in provider.calls[calls_before:])
        provider.drop_share = 0.0
        turns = turns_check(study_id)  # the rush below is refused on purpose: not a lost turn
        log(f"phase 2: {sum(p.done is not None for p in faulted)}/{n} replies, {dropped} streams dropped")

        from decimal import ROUND_UP, Decimal

        from generation.budget import StudyBudget, call_maximum
        from generation.models import LLMConditionConfig
        from kinds.chat.models import ChatSettings

        # One call's maximum: the largest any reservation of the rush holds (its own message, with the longest
        # mark, to the dearest of the source and the fallback).
        sample_messages = [{"role": "user", "content": _message(2 * n + 3 * args.budget_calls)}]
        maximum = max(
            (
                call_maximum(
                    provider=config.provider,
                    system=config.system_prompt,
                    messages=sample_messages,
                    max_tokens=config.max_tokens,
                )  # fmt: skip
                for config in LLMConditionConfig.objects.select_related("provider").filter(
                    condition__study_id=study_id
                )
            ),
            key=lambda m: m.cost,
        )
        cap = (maximum.cost * args.budget_calls).quantize(
            Decimal("0.01"), rounding=ROUND_UP
        )  # budget_usd: cents
        ChatSettings.objects.filter(study_id=study_id).update(budget_usd=cap)
        rush_n = 3 * args.budget_calls
        calls_before = len(provider.calls)
        rushed = asyncio.run(
            wave(stack.base_url, slug, range(2 * n, 2 * n + rush_n), arrival=0.2, deadline_s=20)
        )
        budget = StudyBudget.objects.get(study_id=study_id)
        answered = len(provider.calls) - calls_before
        newcomer = asyncio.run(_newcomer_page(stack.base_url, slug))

        from kinds.chat.models import Conversation, Turn

        cells = Counter(
            (c.condition.name, c.label) for c in Conversation.objects.filter(participant__study_id=study_id)
        )
        counts = list(cells.values())
        result = {
            "bench": "chat",
            "shape": f"gunicorn {args.workers} uvicorn (ASGI) workers, PostgreSQL, Redis, DJANGO_ENV=production",
            "provider": {
                "first_token_s": provider.first_token,
                "tokens_per_s": provider.per_second,
                "tokens": provider.tokens,
                "own_ttft_ms": percentiles(own),
            },  # fmt: skip
            "phase1": phase1,
            "reply_screen": screen_figures(args.tokens),
            "phase2_faults": {
                "conversations": n,
                "streams_dropped_by_provider": dropped,
                "web_worker_killed": 1,
                "replies_complete": sum(p.done is not None for p in faulted),
                "resumes": sum(p.resumes for p in faulted),
            },
            "turns_phase1_and_2": turns,
            "budget_rush": {
                "participants": rush_n,
                "cap_usd": str(cap),
                "one_call_max_usd": str(maximum.cost),
                "spent_usd": str(budget.spent),
                "reserved_usd_after": str(budget.reserved),
                "provider_calls": answered,
                "replies_complete": sum(p.done is not None for p in rushed),
                "closed_politely": sum(p.closed for p in rushed),
                "told_failed": sum(p.failed_lines > 0 for p in rushed),
                "newcomer_after_rush": newcomer,
                "over_cap_by_more_than_one_call": budget.spent > cap + maximum.cost,
                "spent_over_cap_usd": str(max(budget.spent - cap, Decimal(0))),
            },
            "stream_refusals": dict(
                sum((p.refusals for p in [*people, *faulted, *rushed]), Counter()).most_common(5)
            ),
            "turn_errors": dict(
                Counter(
                    error[:160]
                    for error in Turn.objects.filter(conversation__participant__study_id=study_id)
                    .exclude(error="")
                    .values_list("error", flat=True)
                ).most_common(5)
            ),  # fmt: skip
            "label_x_source": {f"{k[0]}/{k[1]}": v for k, v in sorted(cells.items())},
            "label_x_source_imbalance": (max(counts) - min(counts)) if counts else 0,
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
