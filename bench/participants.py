"""A Prolific launch on this machine: simulated participants through the whole flow, against the production
shape (gunicorn + PostgreSQL + Redis), and the floor of the same stack measured in the same run.

    .venv/bin/python bench/participants.py [--participants 300] [--arrival-seconds 60] [--think-ms 12000]

Prints ONE JSON object (progress goes to stderr); `must_show` at its top gathers the headline figures.
Every participant phase runs in two modes, measured in the same run: `in_place` does what the item page's
script does (static/ratings/participant.js: each answer one background POST asking for JSON, the next
item read from the reply) and `form` is a browser without JavaScript (each answer a form POST and the
redirected GET of the next item page: the baseline). Phases, all against one server:

1. launch: `--participants` arrive at random moments within `--arrival-seconds`; each walks entry → consent
   → instructions → (TEQ) → 10 rating pages → completion, thinking `--think-ms` (±50 %) per rating page
   and half that on consent and instructions. Latency percentiles per page kind and method; answers
   acknowledged vs stored; balance. The default think time is realistic and still hurried: 12 s to read a
   situation, an utterance and a reply and pick an answer puts a whole visit at about 2.5 minutes, where
   the seed study's participants took 9–10 (Welivita et al., arXiv 2406.05063).
   Server CPU per completed participant (gunicorn, PostgreSQL backends, Redis: bench/lib/cpu.py) and
   "participants per minute per core" for each mode (`--wave-modes`).
2. stress: the same arrival with `--stress-think-ms` (default 2.5 s per rating page, a visit in about 30 s):
   five times the realistic request rate, to show the headroom. Reported apart; 0 participants skips it.
3. saturation, alternating in --rounds slices so all see the same background load:
   floor: `--concurrency` clients POST back to back to a view that writes one row (full middleware stack);
   page ceiling: the same clients GET a view doing everything a rating page does except the study's
   own work — session read, rate limiter, honeypot, CSRF token, the item template — with no query;
   flow: `--concurrency` clients run whole participants back to back with no think time, in place
   (`flow_at_saturation`) and with form posts (`flow_with_form_posts_at_saturation`); answers stored per
   second over the floor's writes per second, and server CPU per participant again. The study's quota
   (`--quota-per-condition`) leaves room for every participant of the run, so no saturation participant is
   turned away as "study full" (`must_show.saturation_participants_not_completed` shows it stayed 0).

4. baseline (`--baseline REV`, default the code before answers in place; '' for none): a second stack
   serving that revision from a temporary git worktree (its own database and Redis database), whose floor
   and flow (form posts, or in place with `--baseline-flow in_place`) take their slices in the same
   saturation rounds. `must_show` compares server CPU per
   participant in place now with the baseline's, measured side by side.

ratio_to_floor = flow requests/s ÷ floor requests/s at the same concurrency on the same server: the
share of the stack's raw capacity (one HTTP request + one INSERT) the participant flow keeps per request.
page_ceiling_ratio_to_floor is the same for the page ceiling: how much of that capacity a participant
page has left before it reads or writes anything of the study (the bound on ratio_to_floor).
Everything is torn down at the end: gunicorn killed, the database dropped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lib import scale  # noqa: E402
from bench.lib.browser import Browser  # noqa: E402
from bench.lib.cpu import CpuMeter, cpu_compare, cpu_ratio, cpu_total, per_participant  # noqa: E402
from bench.lib.journey import Recorder, entry_path, percentiles, run_participant, run_wave  # noqa: E402
from bench.lib.stack import BASE_DIR, DEFAULT_CORPUS, Stack, log, postgres_autovacuum  # noqa: E402
from bench.lib.study import COMPLETION_CODE, outcomes_check, study_seed, study_seed_in  # noqa: E402


def launch_phase(
    stack: Stack,
    *,
    slug: str,
    participants: int,
    arrival: float,
    think: float,
    seed: int,
    name: str,
    in_place: bool,
):
    return run_wave(
        in_place=in_place,
        base_url=stack.base_url,
        slug=slug,
        participants=participants,
        arrival_seconds=arrival,
        think_seconds=think,
        seed=seed,
        id_prefix=f"{name}-",
        completion_marker=COMPLETION_CODE,
        progress=lambda message: log(f"{name}: {message}"),
    )


def wave_report(recorder, outcomes, seconds: float, client_cpu: float, check: dict) -> dict:
    answers_window = (recorder.last or 0) - (recorder.first or 0)
    server_errors = sum(
        n for status, n in recorder.statuses.items() if status.startswith("5") or status == "0"
    )
    return {
        "participants_completed": sum(o.completed for o in outcomes),
        "participants_failed": [{"id": o.external_id, "error": o.error} for o in outcomes if not o.completed][
            :10
        ],
        "seconds": round(seconds, 1),
        # CPU the simulated browsers themselves used (parsing pages), taken from the same machine's cores.
        "client_cpu_share_of_one_core": round(client_cpu / seconds, 2),
        "requests": recorder.requests,
        "requests_per_s": round(recorder.requests / answers_window, 1) if answers_window else None,
        "statuses": recorder.statuses,
        "errors": server_errors,
        "answers_per_s": round(check["answers_acknowledged"] / answers_window, 2) if answers_window else None,
        "latency_by_page": recorder.summary(),
        "rating_page_latency": rating_latency(recorder),
        **check,
    }


def rating_latency(recorder) -> dict:
    return percentiles(recorder.samples.get("rating GET", []) + recorder.samples.get("rating POST", []))


def _in_window(recorder: Recorder, start: float, stop: float, *, answers: bool = False) -> int:
    """Requests answered inside the window, rate-limited ones (429) not counted. `answers=True`: only the
    rating POSTs the server acknowledged (a redirect, or the in-place JSON reply): answers stored."""
    return sum(
        1
        for end, kind, method, status in recorder.events
        if start <= end <= stop
        and 0 < status < 500
        and status != 429
        and (not answers or (kind == "rating" and method == "POST" and status in (200, 302)))
    )


def _clients(*, recorder: Recorder, concurrency: int, seconds: float, client) -> int | tuple[int, int]:
    """Runs `client(worker, stop_at)` on `concurrency` threads for `seconds`; returns the requests the server
    answered inside that window (see `_in_window`)."""
    return _window(recorder=recorder, concurrency=concurrency, seconds=seconds, client=client)[0]


def _window(*, recorder: Recorder, concurrency: int, seconds: float, client) -> tuple[int, int]:
    """`_clients`, returning (requests, answers stored) inside the window."""
    start = time.monotonic()
    stop_at = start + seconds
    cpu_start = time.process_time()
    threads = [
        threading.Thread(target=client, args=(worker, stop_at), daemon=True) for worker in range(concurrency)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # The simulated browsers' own CPU (this process): near one core, they and not the server set the pace.
    recorder.client_cpu = getattr(recorder, "client_cpu", 0.0) + time.process_time() - cpu_start
    recorder.client_wall = getattr(recorder, "client_wall", 0.0) + time.monotonic() - start
    return _in_window(recorder, start, stop_at), _in_window(recorder, start, stop_at, answers=True)


def floor_slice(stack: Stack, *, recorder: Recorder, concurrency: int, seconds: float) -> int:
    """`concurrency` clients POST to the one-row-write view back to back."""

    def hammer(_worker: int, stop_at: float) -> None:
        browser = Browser(stack.base_url, client_ip="10.255.0.1", record=recorder, retry_seconds=0)
        while time.monotonic() < stop_at:
            browser.request("floor", "POST", "/bench/floor/", {})

    return _clients(recorder=recorder, concurrency=concurrency, seconds=seconds, client=hammer)


def ceiling_slice(stack: Stack, *, recorder: Recorder, concurrency: int, seconds: float) -> int:
    """`concurrency` clients GET the page-ceiling view back to back, each with a session of its own (the
    first request stores it; the others read it from Redis as participant pages do). Each client starts
    a new session from a new address every 50 requests, as new participants would: the production rate
    limits stay on, and no client reaches them (60 requests a minute per participant)."""

    def hammer(worker: int, stop_at: float) -> None:
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            browser = Browser(
                stack.base_url,
                client_ip=f"10.{250 - worker}.{n // 256 % 256}.{n % 256}",
                record=recorder,
                retry_seconds=0,
            )
            for _ in range(50):
                if time.monotonic() >= stop_at:
                    break
                browser.request("ceiling", "GET", "/bench/page/")

    return _clients(recorder=recorder, concurrency=concurrency, seconds=seconds, client=hammer)


def flow_slice(
    stack: Stack,
    *,
    recorder: Recorder,
    outcomes: list,
    slug: str,
    concurrency: int,
    seconds: float,
    seed: int,
    in_place: bool,
) -> tuple[int, int]:
    """`concurrency` clients run whole participants back to back with no think time. Requests (and stored
    answers) finishing inside the window are counted; participants under way at its end are finished (not
    counted), so nobody is left half-way to upset the balance figures."""
    lock = threading.Lock()

    def loop(worker: int, stop_at: float) -> None:
        rng = random.Random(seed * 1000 + worker)
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            external_id = f"sat{'j' if in_place else 'f'}{seed:03d}w{worker:03d}x{n:05d}"
            outcome = run_participant(
                base_url=stack.base_url,
                entry_path=entry_path(slug, external_id),
                external_id=external_id,
                # Each flow its own addresses: the per-address enrolment limit must not carry over between them.
                client_ip=f"10.{200 + seed % 50}.{worker + (0 if in_place else 100)}.{n % 256}",
                recorder=recorder,
                think_seconds=0.0,
                completion_marker=COMPLETION_CODE,
                rng=rng,
                in_place=in_place,
            )
            with lock:
                outcomes.append(outcome)

    return _window(recorder=recorder, concurrency=concurrency, seconds=seconds, client=loop)


# The code before answers were sent in place (every answer a form post and the redirected item page).
BASELINE_REF = "cebc8c4"

FLOWS = {"flow": True, "flow_form": False}  # in place (with JavaScript) / plain form posts (without)


def saturation_phase(
    stack: Stack,
    *,
    slug: str,
    concurrency: int,
    seconds: float,
    rounds: int,
    seed: int,
    meter: CpuMeter,
    baseline: tuple[Stack, CpuMeter] | None = None,
    baseline_in_place: bool = False,
) -> dict:
    """The floor, the page ceiling and the flow in both modes at the same concurrency, alternated in `rounds`
    slices so that all see the same background load of the machine (which other processes may share). Each
    gets `seconds` in all, so their request counts compare directly. Server CPU is summed over each
    flow's slices (participants under way at a slice's end are finished in it, so every participant whose
    CPU is counted is counted as completed). `baseline`: a second stack running an older checkout (see
    `--baseline`), whose floor and form-post flow take their slices in the same rounds."""
    names = ("floor", "ceiling", *FLOWS, *(("baseline_floor", "baseline_flow") if baseline else ()))
    recorders = {name: Recorder() for name in names}
    done = dict.fromkeys(recorders, 0)
    answers = dict.fromkeys([*FLOWS, "baseline_flow"], 0)
    cpu = {name: {"gunicorn": 0.0, "postgres": 0.0, "redis": 0.0} for name in answers}
    outcomes: dict[str, list] = {name: [] for name in answers}
    per_slice = seconds / rounds

    def flow_run(target: Stack, target_meter: CpuMeter, name: str, *, in_place: bool, seed: int) -> None:
        before = target_meter.sample()
        requests, stored = flow_slice(
            target,
            recorder=recorders[name],
            outcomes=outcomes[name],
            slug=slug,
            concurrency=concurrency,
            seconds=per_slice,
            seed=seed,
            in_place=in_place,
        )
        for group, used in target_meter.between(before, target_meter.sample()).items():
            cpu[name][group] += used
        done[name] += requests
        answers[name] += stored

    for r in range(rounds):
        for name, target in (("floor", floor_slice), ("ceiling", ceiling_slice)):
            done[name] += target(stack, recorder=recorders[name], concurrency=concurrency, seconds=per_slice)
        for name, in_place in FLOWS.items():
            flow_run(stack, meter, name, in_place=in_place, seed=seed * 10 + r)
        if baseline:
            old_stack, old_meter = baseline
            done["baseline_floor"] += floor_slice(
                old_stack, recorder=recorders["baseline_floor"], concurrency=concurrency, seconds=per_slice
            )
            flow_run(old_stack, old_meter, "baseline_flow", in_place=baseline_in_place, seed=seed * 10 + r)
        elapsed = per_slice * (r + 1)
        log(
            f"saturation round {r + 1}/{rounds}: floor {done['floor'] / elapsed:.0f} req/s, "
            f"page ceiling {done['ceiling'] / elapsed:.0f} req/s, flow in place {done['flow'] / elapsed:.0f} "
            f"req/s ({answers['flow'] / elapsed:.0f} answers/s), flow with form posts "
            f"{done['flow_form'] / elapsed:.0f} req/s ({answers['flow_form'] / elapsed:.0f} answers/s)"
        )

    def throughput(name: str, **details) -> dict:
        recorder = recorders[name]
        return {
            "requests_in_window": done[name],
            "seconds": round(seconds, 1),
            "requests_per_s": round(done[name] / seconds, 1),
            "client_cpu_share_of_one_core": round(recorder.client_cpu / recorder.client_wall, 2)
            if getattr(recorder, "client_wall", 0)
            else None,
            **details,
            "statuses": recorders[name].statuses,
        }

    def flow(name: str, floor: str) -> dict:
        completed = sum(o.completed for o in outcomes[name])
        return throughput(
            name,
            answers_stored_in_window=answers[name],
            answers_per_s=round(answers[name] / seconds, 1),
            ratio_to_floor=round(done[name] / done[floor], 3) if done[floor] else None,
            answers_ratio_to_floor=round(answers[name] / done[floor], 3) if done[floor] else None,
            participants_completed=completed,
            # Participants who did not finish (e.g. the study's page "this study is full"): their requests
            # count as the flow's, their answers do not exist. The quota (--quota-per-condition) is meant
            # to leave this at 0.
            participants_not_completed=len(outcomes[name]) - completed,
            not_completed_first=[o.error[:160] for o in outcomes[name] if not o.completed][:3],
            answers_acknowledged=sum(len(o.acknowledged) for o in outcomes[name]),
            server_cpu=per_participant(cpu[name], completed),
            latency_by_page=recorders[name].summary(),
        )

    flows = {name: flow(name, "floor") for name in FLOWS}
    if baseline:
        flows["baseline"] = {
            "floor": throughput(
                "baseline_floor",
                latency=percentiles(recorders["baseline_floor"].samples.get("floor POST", [])),
            ),
            "flow": flow("baseline_flow", "baseline_floor"),
            "flow_mode": "in_place" if baseline_in_place else "form",
        }
    return {
        "floor": throughput("floor", latency=percentiles(recorders["floor"].samples.get("floor POST", []))),
        "ceiling": throughput(
            "ceiling", latency=percentiles(recorders["ceiling"].samples.get("ceiling GET", []))
        ),
        **flows,
        "baseline": flows.pop("baseline", None),
        "outcomes": [o for name in FLOWS for o in outcomes[name]],
        # Same seconds for all: the ratios of their request counts are the ratios of their rates.
        "ratio": done["flow"] / done["floor"] if done["floor"] else None,
        "answers_ratio": answers["flow"] / done["floor"] if done["floor"] else None,
        "ceiling_ratio": done["ceiling"] / done["floor"] if done["floor"] else None,
    }


@contextlib.contextmanager
def baseline_stack(args, *, slug: str, ref: str, quota: int):
    """A second stack (its own database, gunicorn with as many workers) serving the code of revision `ref`
    from a temporary git worktree, seeded with the same study; yields (stack, its CPU meter)."""
    tree = Path(tempfile.mkdtemp(prefix="empathy-baseline-")) / "tree"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(tree), ref],
        cwd=BASE_DIR,
        check=True,
        capture_output=True,
    )
    log(f"baseline: revision {ref} in {tree}")
    # A Redis database of its own: the two stacks' rate-limit counters would otherwise add up (same study id,
    # same simulated client addresses).
    base, _, number = args.redis_url.rpartition("/")
    redis_url = args.baseline_redis_url or f"{base}/{(int(number or 0) + 1) % 16}"
    try:
        with Stack(workers=args.workers, redis_url=redis_url, name="baseline", root=tree) as old:
            study_seed_in(old, slug=slug, corpus=args.corpus, ask_teq=args.teq, quota_per_condition=quota)
            old.start_server()
            meter = old.cpu_meter()
            try:
                yield old, meter
            finally:
                meter.close()
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=BASE_DIR, capture_output=True)
        shutil.rmtree(tree.parent, ignore_errors=True)


def scale_main(args) -> dict:
    sizes = sorted(int(size) for size in args.scale.split(","))
    current = scale.run(
        sizes, root=BASE_DIR, enrolments=args.scale_enrolments, views_at_largest=True, label="now"
    )
    baseline = None
    if args.scale_baseline:
        with scale.worktree(args.scale_baseline) as tree:
            baseline = scale.run(
                sizes, root=tree, enrolments=args.scale_enrolments, views_at_largest=False, label="base"
            )
    result = scale.report(sizes, current, baseline, args.scale_baseline)
    print(json.dumps(result, indent=1))
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--participants", type=int, default=300)
    parser.add_argument("--arrival-seconds", type=float, default=60.0)
    parser.add_argument("--think-ms", type=float, default=12000.0, help="mean think time per rating page")
    parser.add_argument("--stress-participants", type=int, default=None, help="default: --participants")
    parser.add_argument("--stress-think-ms", type=float, default=2500.0)
    parser.add_argument("--teq", action="store_true", help="ask the TEQ before rating")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument(
        "--wsgi",
        action="store_true",
        help="serve this code's WSGI application in sync workers (default: ASGI)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=8, help="clients in the floor and saturation phases"
    )
    parser.add_argument("--saturation-seconds", type=float, default=24.0, help="for each of floor and flow")
    parser.add_argument("--rounds", type=int, default=3, help="alternating floor/flow slices")
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/6"))
    parser.add_argument(
        "--baseline-redis-url",
        default="",
        help="the baseline stack's Redis database (flushed at its start; default: the next database number)",
    )
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--quota-per-condition",
        type=int,
        default=100_000,
        help="the study's quota per condition (both stacks). The default leaves room for every participant of a "
        "whole run: a study that fills during the saturation rounds turns the flow into entries refused "
        "as full, which store no answers",
    )
    parser.add_argument(
        "--baseline",
        default=BASELINE_REF,
        help="a git revision of this repository whose code serves a second stack in the saturation rounds "
        "(its floor and its form-post flow, alternated with the others): today's figures against the code "
        f"as it was, in the same run. Default {BASELINE_REF}, the code before answers in place; '' for none",
    )
    parser.add_argument(
        "--baseline-flow",
        choices=("form", "in_place"),
        default="form",
        help="how the baseline's participants answer: form posts (default: the code before answers in place had "
        "nothing else) or in place (to compare with a later revision that answers in place too)",
    )
    parser.add_argument(
        "--wave-modes",
        default="form,in_place",
        help="which flows each wave runs, one after the other: form (no JavaScript: form posts and redirects, "
        "the baseline) and/or in_place (what the item page's script does: one background POST per answer)",
    )
    parser.add_argument(
        "--scale",
        default="",
        help="instead of a launch, costs as the study grows (bench/lib/scale.py): comma-separated sizes in "
        "participants, e.g. 1000,10000,100000",
    )
    parser.add_argument("--scale-enrolments", type=int, default=200, help="enrolments timed at each size")
    parser.add_argument(
        "--scale-baseline", default="", help="a git revision whose enrolment is measured at the same sizes"
    )
    args = parser.parse_args(argv)
    if args.scale:
        return scale_main(args)
    modes = [m.strip() for m in args.wave_modes.split(",") if m.strip()]
    if not modes or set(modes) - {"form", "in_place"}:
        parser.error("--wave-modes: form and/or in_place")
    load_before = os.getloadavg()

    slug = "launch"
    with Stack(workers=args.workers, redis_url=args.redis_url) as stack:
        stack.django_setup()
        quota = args.quota_per_condition
        seeded = study_seed(stack, slug=slug, corpus=args.corpus, ask_teq=args.teq, quota_per_condition=quota)
        stack.start_server(asgi=not args.wsgi)
        meter = stack.cpu_meter()
        autovacuum = postgres_autovacuum()

        waves = {}
        stress_participants = (
            args.participants if args.stress_participants is None else args.stress_participants
        )
        for name, count, think in (
            ("launch", args.participants, args.think_ms),
            ("stress", stress_participants, args.stress_think_ms),
        ):
            if not count:
                continue
            for mode in modes:
                key = name if mode == "in_place" else f"{name}_form"
                prefix = f"{name}-{'js' if mode == 'in_place' else 'form'}-"
                log(
                    f"{key}: {count} participants within {args.arrival_seconds:.0f}s, think {think:.0f} ms, "
                    f"{mode.replace('_', ' ')}"
                )
                client_cpu_start = time.process_time()
                cpu_before = meter.sample()
                recorder, outcomes, seconds = launch_phase(
                    stack,
                    slug=slug,
                    participants=count,
                    arrival=args.arrival_seconds,
                    think=think / 1000,
                    seed=args.seed + len(waves),
                    name=prefix.rstrip("-"),
                    in_place=mode == "in_place",
                )
                used = meter.between(cpu_before, meter.sample())
                check = outcomes_check(slug=slug, outcomes=outcomes, id_prefix=prefix)
                report = wave_report(
                    recorder, outcomes, seconds, time.process_time() - client_cpu_start, check
                )
                report["mode"] = mode
                report["server_cpu"] = per_participant(used, report["participants_completed"])
                waves[key] = (recorder, outcomes, report)

        log(f"floor and flow at saturation: {args.concurrency} clients, {args.saturation_seconds:.0f}s each")
        with contextlib.ExitStack() as others:
            baseline = None
            if args.baseline:
                baseline = others.enter_context(
                    baseline_stack(args, slug=slug, ref=args.baseline, quota=quota)
                )
            saturation = saturation_phase(
                stack,
                slug=slug,
                concurrency=args.concurrency,
                seconds=args.saturation_seconds,
                rounds=args.rounds,
                seed=args.seed,
                meter=meter,
                baseline=baseline,
                baseline_in_place=args.baseline_flow == "in_place",
            )
        meter.close()
        all_outcomes = [o for _r, outcomes, _w in waves.values() for o in outcomes]
        final_check = outcomes_check(slug=slug, outcomes=all_outcomes + saturation["outcomes"])

    def wave(key: str) -> dict | None:
        return waves[key][2] if key in waves else None

    cpu_comparison = cpu_compare(
        waves={key: report for key, (_r, _o, report) in waves.items()},
        saturation={
            "in_place": saturation["flow"]["server_cpu"],
            "form": saturation["flow_form"]["server_cpu"],
        },
    )
    stress = wave("stress")
    stress_p99 = stress["rating_page_latency"].get("p99_ms", 1e9) if stress else None
    ratio = saturation["ratio"]
    answers_ratio = saturation["answers_ratio"]
    baseline = saturation["baseline"]
    before = cpu_total(baseline["flow"]["server_cpu"]) if baseline else None
    now = cpu_total(saturation["flow"]["server_cpu"])
    cpu_vs_baseline = cpu_ratio(now, before)
    result = {
        "benchmark": "participants",
        "setup": {
            "participants": args.participants,
            "arrival_seconds": args.arrival_seconds,
            "think_ms_mean": args.think_ms,
            "stress_think_ms_mean": args.stress_think_ms,
            "teq": args.teq,
            "wave_modes": modes,
            "gunicorn_workers": args.workers,
            "web": "WSGI, sync workers" if args.wsgi else "ASGI, uvicorn workers",
            "concurrency_floor_and_saturation": args.concurrency,
            "saturation_seconds": args.saturation_seconds,
            "cpu_count": os.cpu_count(),
            "postgres_autovacuum": autovacuum,
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "study": seeded,
            "note": "client threads run on the same machine as the server and compete for its CPUs",
        },
        "must_show": {
            "answers_per_s_at_saturation_over_floor_writes_per_s": round(answers_ratio, 3)
            if answers_ratio
            else None,
            "flow_requests_per_s_over_floor": round(ratio, 3) if ratio else None,
            "flow_with_form_posts_requests_per_s_over_floor": saturation["flow_form"]["ratio_to_floor"],
            "flow_with_form_posts_answers_per_s_over_floor": saturation["flow_form"][
                "answers_ratio_to_floor"
            ],
            "stress_rating_p99_ms": stress_p99,
            "stress_form_rating_p99_ms": wave("stress_form")["rating_page_latency"].get("p99_ms")
            if wave("stress_form")
            else None,
            "server_cpu_ms_per_participant_at_saturation_vs_baseline": {
                "in_place_now": now,
                "baseline": before,
                "baseline_flow": baseline["flow_mode"] if baseline else None,
                "ratio": cpu_vs_baseline,
                "baseline_revision": args.baseline or None,
                "baseline_answers_per_s_over_its_floor": baseline["flow"]["answers_ratio_to_floor"]
                if baseline
                else None,
                "baseline_flow_requests_per_s_over_its_floor": baseline["flow"]["ratio_to_floor"]
                if baseline
                else None,
            },
            "server_cpu_ms_per_participant": cpu_comparison,
            # Saturation participants who did not finish (their requests counted, no answers): 0 when the
            # measured flow is the whole participant flow.
            "saturation_participants_not_completed": saturation["flow"]["participants_not_completed"]
            + saturation["flow_form"]["participants_not_completed"],
            "answers_lost": final_check["answers_lost"],
            "duplicates": final_check["duplicates"],
            "condition_imbalance": final_check["condition_imbalance"],
        },
        **{key: report for key, (_r, _o, report) in waves.items()},
        "floor": saturation["floor"],
        "page_ceiling": saturation["ceiling"],
        "flow_at_saturation": saturation["flow"],
        "flow_with_form_posts_at_saturation": saturation["flow_form"],
        "baseline_at_saturation": baseline,
        "ratio_to_floor": round(ratio, 3) if ratio else None,
        "page_ceiling_ratio_to_floor": round(saturation["ceiling_ratio"], 3)
        if saturation["ceiling_ratio"]
        else None,
        "ratio_definition": (
            "requests/s of the participant flow (every GET and POST: entry, consent, instructions, rating and "
            "completion pages; redirects followed as separate requests; in place: one background POST per "
            "answer) with --concurrency clients and no think time, divided by requests/s of the one-row-write "
            "floor view (POST, full middleware stack, one INSERT) with the same --concurrency clients, same "
            "server, same run; all alternate in --rounds slices so they see the same background load; only "
            "requests finishing inside a slice are counted. answers_ratio_to_floor: rating POSTs acknowledged "
            "(answers stored) per second over the floor's writes per second"
        ),
        "page_ceiling_definition": (
            "requests/s of /bench/page/ over the floor's: a GET doing what every participant page does that is "
            "not the study's own work (session read from Redis, rate limiter, honeypot, CSRF token, the item "
            "template rendered) with no database query; the best ratio_to_floor any full participant page "
            "could reach"
        ),
        "after_all_phases": final_check,
        "goals": {
            "answers_ratio_to_floor_ge_0_5": bool(answers_ratio) and answers_ratio >= 0.5,
            "ratio_to_floor_ge_0_5": bool(ratio) and ratio >= 0.5,
            "stress_rating_p99_ms_lt_100": stress_p99 is not None and stress_p99 < 100,
            "cpu_per_participant_le_quarter_of_baseline": cpu_vs_baseline is not None
            and cpu_vs_baseline <= 0.25,
            "answers_lost_eq_0": final_check["answers_lost"] == 0,
            "duplicates_eq_0": final_check["duplicates"] == 0,
            "condition_imbalance_le_1": final_check["condition_imbalance"] <= 1,
        },
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
