"""Where a participant's server CPU goes at saturation, one request kind at a time, in the production shape
(gunicorn + PostgreSQL + Redis), against the floor measured in the same run.

    .venv/bin/python bench/participant_split.py [--participants-per-client 60] [--rounds 2]

bench/participants.py measures whole participants; this splits them. `by_process` also gives the benchmark's
own clients' CPU (`client`), which shares the machine's cores with the server. Each round runs, one phase after the
other, with `--concurrency` clients (8) and no think time:

1. floor: the clients POST back to back to the one-row-write view for `--floor-seconds`;
2. entry: each client enters `--participants-per-client` new participants (the entry link: enrolment and the
   consent page);
3. instructions_with_consent: the same participants continue from the instructions the consent page carried,
   posting the consent with them, in place (the reply carries their first item); with `--consent-apart`, two
   phases instead: consent (agreed to in place, the reply the instructions page), then instructions;
4. answers: the same participants answer all their items, in place (one background POST per answer).

Each phase's server CPU (gunicorn, the PostgreSQL backends of the benchmark's database, Redis:
bench/lib/cpu.py) is divided by the requests it served, and also given in floors (that CPU over the floor
request's) and by process group (`by_process`: gunicorn, PostgreSQL, Redis). `answers_only_over_floor` is answers/s of the answers' phase over the floor's requests/s: the ceiling of
bench/participants.py's answers ÷ floor if the setup cost nothing. Prints ONE JSON
object; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lib.browser import POSITION, Browser, step_fields  # noqa: E402
from bench.lib.cpu import CpuMeter  # noqa: E402
from bench.lib.journey import Recorder, entry_path  # noqa: E402
from bench.lib.stack import DEFAULT_CORPUS, Stack, log, postgres_autovacuum  # noqa: E402
from bench.lib.study import study_seed  # noqa: E402
from bench.participants import floor_slice  # noqa: E402

STEP = "/s/{slug}/step/"


class Participant:
    """One simulated browser with JavaScript, carried from phase to phase."""

    def __init__(self, browser: Browser, external_id: str) -> None:
        self.browser, self.external_id = browser, external_id
        self.fields: dict = {}
        self.position: str | None = None
        self.answers = 0

    def post(self, kind: str, slug: str, data: dict) -> dict:
        reply = self.browser.request(
            kind, "POST", STEP.format(slug=slug), {**self.fields, **data}, accept="application/json"
        )
        if reply.status != 200:
            raise RuntimeError(f"{kind} of {self.external_id}: HTTP {reply.status}")
        return json.loads(reply.body)


def _measured(meter: CpuMeter, work) -> tuple[dict, float, int]:
    """Runs `work()`, which returns the requests it served; (CPU used, seconds, requests), the CPU by process
    group with the benchmark's own clients as `client`."""
    before, started, client = meter.sample(), time.monotonic(), time.process_time()
    served = work()
    used = meter.between(before, meter.sample())
    return {**used, "client": time.process_time() - client}, time.monotonic() - started, served


def _phase(meter: CpuMeter, groups: list[list[Participant]], step) -> tuple[dict, float, int]:
    """Runs `step(participant)` for every participant, one thread per group (`_measured`)."""
    served = [0] * len(groups)

    def run(index: int) -> None:
        for participant in groups[index]:
            served[index] += step(participant)

    def all_groups() -> int:
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(groups))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return sum(served)

    return _measured(meter, all_groups)


def server_ms(used: dict[str, float], served: int) -> float:
    """Server CPU ms a request: every process group but the benchmark's own clients."""
    return sum(seconds for group, seconds in used.items() if group != "client") / served * 1000


def split_round(stack: Stack, meter: CpuMeter, *, slug: str, round_: int, args) -> dict:
    recorder = Recorder()
    floor_cpu, floor_seconds, floors = _measured(
        meter,
        lambda: floor_slice(
            stack, recorder=recorder, concurrency=args.concurrency, seconds=args.floor_seconds
        ),
    )
    floor_ms = server_ms(floor_cpu, floors)
    groups = [
        [
            Participant(
                Browser(stack.base_url, client_ip=f"10.{150 + round_}.{c}.{i % 250}", record=recorder),
                f"split{round_}c{c:02d}x{i:04d}",
            )
            for i in range(args.participants_per_client)
        ]
        for c in range(args.concurrency)
    ]

    def enter(p: Participant) -> int:
        page = p.browser.request("entry", "GET", entry_path(slug, p.external_id)).body
        p.fields = step_fields(page)
        return 1

    def consent(p: Participant) -> int:
        p.post("consent", slug, {"step": "consent", "decision": "agree"})
        return 1

    def instructions(p: Participant) -> int:
        p.position = POSITION.search(p.post("instructions", slug, {"step": "instructions"})["page"]).group(1)
        return 1

    def instructions_with_consent(p: Participant) -> int:
        # What participant.js sends: the consent page carried the instructions, "continue" posts both.
        reply = p.post("instructions", slug, {"step": "instructions", "agreed": "1"})
        p.position = POSITION.search(reply["page"]).group(1)
        return 1

    def answers(p: Participant) -> int:
        rng = random.Random(p.external_id)
        while p.position is not None:
            reply = p.post(
                "answer", slug, {"step": "items", "position": p.position, "value": rng.choice("123")}
            )
            p.answers += 1
            p.position = str(reply["item"]["position"]) if "item" in reply else None
        return p.answers

    def by_process(used: dict[str, float], served: int) -> dict[str, float]:
        return {group: round(seconds / served * 1000, 3) for group, seconds in used.items()}

    result = {
        "floor": {
            "requests_per_s": round(floors / floor_seconds, 1),
            "server_cpu_ms_per_request": round(floor_ms, 3),
            "by_process": by_process(floor_cpu, floors),
        }
    }
    if args.consent_apart:  # the consent posted on its own (a slow reader's), then the instructions
        setup_steps = [("consent", consent), ("instructions", instructions)]
    else:
        setup_steps = [("instructions_with_consent", instructions_with_consent)]
    for name, step in [("entry", enter), *setup_steps, ("answer", answers)]:
        used, seconds, served = _phase(meter, groups, step)
        ms = server_ms(used, served)
        result[name] = {
            "requests": served,
            "requests_per_s": round(served / seconds, 1),
            "server_cpu_ms_per_request": round(ms, 3),
            "in_floors": round(ms / floor_ms, 2),
            "by_process": by_process(used, served),
        }
        log(f"round {round_ + 1}: {name} {result[name]}")
    result["answers_only_over_floor"] = round(
        result["answer"]["requests_per_s"] / result["floor"]["requests_per_s"], 3
    )
    setup = sum(result[name]["server_cpu_ms_per_request"] for name in ["entry", *dict(setup_steps)])
    per_participant = result["answer"]["requests"] / (args.concurrency * args.participants_per_client)
    result["participant_server_cpu_ms"] = {
        "setup": round(setup, 2),
        "answers": round(result["answer"]["server_cpu_ms_per_request"] * per_participant, 2),
        "answers_per_participant": per_participant,
    }
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--participants-per-client", type=int, default=60)
    parser.add_argument("--floor-seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--consent-apart",
        action="store_true",
        help="post the consent on its own, then the instructions (as participant.js does for a slow reader)",
    )
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/7")
    args = parser.parse_args(argv)
    slug = "launch"
    with Stack(workers=args.workers, redis_url=args.redis_url, name="split") as stack:
        stack.django_setup()
        study_seed(stack, slug=slug, corpus=DEFAULT_CORPUS, ask_teq=False, quota_per_condition=100_000)
        stack.start_server()
        meter = stack.cpu_meter()
        autovacuum = postgres_autovacuum()
        try:
            stack.warm_up()
            rounds = [split_round(stack, meter, slug=slug, round_=r, args=args) for r in range(args.rounds)]
        finally:
            meter.close()
    result = {
        "benchmark": "participant_split",
        "setup": {
            "concurrency": args.concurrency,
            "participants_per_round": args.concurrency * args.participants_per_client,
            "gunicorn_workers": args.workers,
            "postgres_autovacuum": autovacuum,
        },
        "rounds": rounds,
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
