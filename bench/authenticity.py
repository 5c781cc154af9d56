"""Authenticity: how often the score flags people and agents, driven through the real participant pages, and what
the signals add to an answer's server time.

    .venv/bin/python bench/authenticity.py [--kind rating|pairwise] [--per-kind 50] [--concurrency 4] \
        [--compression 0.1] [--picture/--no-picture] [--latency-participants 60] [--time-limit SECONDS]

`--per-kind 0` runs the latency phase alone (below): a quick re-measure, e.g. on a quiet machine. `--time-limit`:
past that many seconds of the browser phase no further walker starts (those under way finish); each group's
`started` and `completed` say how many ran (the walkers are shuffled, so the kinds are cut alike).

Prints ONE JSON object (progress on stderr). A throwaway production-shaped stack (bench/lib/stack.py: gunicorn,
its own PostgreSQL database and Redis database) serves one live study with the traps at a new study's defaults
(NEW_STUDY_TRAPS: the hidden instruction and two consistency pairs) and, with `--picture` (the default, on either
kind), the picture check with its sound: `--kind rating` the public dataset's rating study
(bench/lib/study.py), `--kind pairwise` the pairwise demo (kinds/pairwise/demo.py). The study has one simulated
LLM judge whose answers are stored as a judge's are (generation's JudgeRating), from the latent qualities of
bench/lib/answers_model.py: people agree with it at kappa about 0.3, agents at about 0.85 (`answers.calibration`).

`--per-kind` participants of each of eleven kinds (bench/lib/authenticity_walkers.py has the table), `--concurrency`
at a time: five kinds of people (mouse, keyboard, touch, screen reader, fast but honest) in a browser with a
person's surface; four kinds of agents (CDP clicks obeying and ignoring injected text, an accessibility-tree
agent, a pointer-path agent, all with webdriver hidden by an init script) in a browser driven as agents drive it;
two plain-HTTP posters (no JavaScript; one forging `sig`). People see the picture check (the bench asks the server
what it asks, `picture_answer`, and what its sound says, `beeps_asked`) and slip with probability `--people-slip`
(0.041: Affonso 2026's Prolific people failed its cognitive traps that often).

Time compression: every pause is multiplied by `--compression` (0.1), and so is the server's one timing
threshold (AUTHENTICITY_FAST_PAGE_MS). The rank correlation of time with length ("reading time ignores length")
does depend on it: the server's and the browser's own time per page (round trips, rendering, a loaded machine) is
not compressed, and under strong compression it swamps the reading time. With the walkers' reader model on the
pairwise demo's texts the reason fires for 0.1 % of people at full time, 9 % at 0.05 with 0.3 s of overhead a page
and 43 % with 1 s: run people at 0.25 or more (waiting costs no CPU; raise `--concurrency` instead). A tab switch in
headless Chromium is seen by the page as a window blur.

Reported per kind and style: `flag_rate` (the score as stored), `flag_rate_without_picture` (recomputed without the
picture check: the new defaults alone), the reasons' counts; `roc`: at each threshold, the share of people and of
agents (agents and posters) whose score (no signals: 100) is below it, with the area under the curve. Two
machine-dependent caveats: the bench's people and agents share one headless Chromium build, so software rendering
(`swgl`) shows for all (it weighs only beside another footprint), and the people's browser is given a desktop's
screen through the DevTools protocol, which leaves nothing in the page.

Added server latency per answer (rating only): after the browser phase, fresh participants answer through the full
Django stack with Django's test client, every other answer with the signals a person's page sends, and
`studies.authenticity.signals_record` (parse, store, score) is timed on each answer that carries them, with the
savepoint the answer then opens inside the signals' transaction (ratings.flow `signals_kept`), in wall time and
this process's CPU time. The goal is its wall-time p99 below 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lib.answers_model import PAIR, RATING, Latent, calibration  # noqa: E402
from bench.lib.authenticity_walkers import DESKTOP_UA, KINDS, Walker  # noqa: E402
from bench.lib.journey import percentiles  # noqa: E402
from bench.lib.stack import DEFAULT_CORPUS, Stack, log  # noqa: E402
from bench.lib.study import study_seed  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
PERSON_ARGS = [
    "--disable-blink-features=AutomationControlled"
]  # webdriver off natively: no script in the page
SLUG = "authenticity"
FAST_PAGE_MS = 1500  # AUTHENTICITY_FAST_PAGE_MS's default, compressed with the pauses


class Hooks:
    """What a person perceives on the picture check, asked of the server (as a person reads it off the picture,
    or counts it in the sound)."""

    def __init__(self, slug: str):
        self.slug = slug

    def _participant(self, pid: str):
        from studies.models import Participant

        return Participant.objects.select_related("study").get(external_id=pid, study__slug=self.slug)

    def picture_label(self, pid: str) -> str:
        from django.db import connection

        from studies.authenticity import picture_answer
        from studies.kinds import kind_of

        try:
            participant = self._participant(pid)
            study = participant.study
            options = kind_of(study).picture_options(study)
            return picture_answer(study=study, participant_id=participant.pk, options=options)["label"]
        finally:
            connection.close()  # a worker thread's own connection

    def beeps(self, pid: str) -> int:
        from django.db import connection

        from studies.authenticity_picture import beeps_asked
        from studies.kinds import kind_of

        try:
            participant = self._participant(pid)
            study = participant.study
            options = kind_of(study).picture_options(study)
            return beeps_asked(study=study, participant_id=participant.pk, options=options)
        finally:
            connection.close()


def study_prepare(stack: Stack, args) -> tuple[dict, Latent]:
    """The live study with the traps at a new study's defaults, and its simulated judge's answers stored."""
    from generation.judge_models import Judge, JudgeRating
    from generation.models import Provider
    from studies.authenticity_models import NEW_STUDY_TRAPS
    from studies.models import Response, Study

    if args.kind == "rating":
        seeded = study_seed(stack, slug=SLUG, corpus=args.corpus, ask_teq=False, quota_per_condition=1000)
        Study.objects.filter(slug=SLUG).update(**NEW_STUDY_TRAPS, trap_picture=args.picture)
    else:
        from kinds.pairwise.demo import pairwise_demo_ensure

        study = pairwise_demo_ensure()
        Study.objects.filter(pk=study.pk).update(
            slug=SLUG, quota_per_condition=1000, **NEW_STUDY_TRAPS, trap_picture=args.picture
        )
        seeded = {"study": "pairwise demo", "items_per_participant": study.items_per_participant}
    study = Study.objects.get(slug=SLUG)
    responses = list(
        Response.objects.filter(condition__study=study, sample_index=0).values_list("id", "text", "prompt_id")
    )
    latent = Latent([" ".join(text.split()) for _, text, _ in responses], seed=args.seed)
    provider = Provider.objects.create(name="bench-judge", kind="openai")
    judge = Judge.objects.create(study=study, name="simulated-judge", provider=provider, model="simulated")
    scale = {option["label"]: option["value"] for option in study.scale}
    rows = []
    if args.kind == "rating":
        for rid, text, _ in responses:
            value = scale[latent.judge((" ".join(text.split()),))]
            rows.append(
                JudgeRating(judge=judge, response_id=rid, status=JudgeRating.Status.DONE, value=value)
            )
    else:
        by_prompt: dict[int, list] = {}
        for rid, text, prompt in responses:
            by_prompt.setdefault(prompt, []).append((rid, " ".join(text.split())))
        for replies in by_prompt.values():
            for i, (a, text_a) in enumerate(replies):
                for b, text_b in replies[i + 1 :]:
                    verdict = PAIR.index(latent.judge((text_a, text_b))) + 1  # 1 A, 2 B, 3 about the same
                    rows.append(
                        JudgeRating(
                            judge=judge,
                            response_id=a,
                            versus_id=b,
                            status=JudgeRating.Status.DONE,
                            value=verdict,
                        )
                    )
    JudgeRating.objects.bulk_create(rows, batch_size=1000)
    seeded["judge_ratings"] = len(rows)
    return seeded, latent


def walkers_make(args, latent: Latent) -> list[Walker]:
    rng = random.Random(args.seed)
    hooks = Hooks(SLUG)
    out = [
        Walker(kind, style, i, args, random.Random(rng.random()), latent, hooks)
        for kind, styles in KINDS.items()
        for style in styles
        if not args.styles or style in args.styles.split(",")
        for i in range(args.per_kind)
    ]
    rng.shuffle(out)  # the kinds interleaved, so they share the server's load alike
    return out


async def browser_phase(
    base_url: str, walkers: list[Walker], concurrency: int, time_limit: float | None = None
) -> dict[str, str]:
    """Every walker, `concurrency` at a time; past `time_limit` seconds no walker starts (those under way
    finish, the others are reported as not started)."""
    from playwright.async_api import async_playwright

    errors: dict[str, str] = {}
    gate = asyncio.Semaphore(concurrency)
    done = [0]
    stop_at = time.monotonic() + time_limit if time_limit else None

    async with async_playwright() as playwright:
        browsers = {
            "people": await playwright.chromium.launch(
                executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *PERSON_ARGS], headless=True
            ),
            "agents": await playwright.chromium.launch(
                executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
            ),
        }

        async def one(walker: Walker) -> None:
            async with gate:
                if stop_at is not None and time.monotonic() > stop_at:
                    walker.started = False
                    return
                try:
                    await walker.walk(browsers, base_url)
                except Exception as exc:  # reported in the JSON; the run goes on
                    errors[walker.pid] = f"{type(exc).__name__}: {str(exc)[:200]}"
                done[0] += 1
                if done[0] % 10 == 0:
                    log(f"{done[0]}/{len(walkers)} walkers done")

        await asyncio.gather(*(one(w) for w in walkers))
        for browser in browsers.values():
            await browser.close()
    return errors


def _head(reason: str) -> str:
    return reason.split(":")[0].split(" on ")[0].split(" (-")[0]


def flag_rates(walkers: list[Walker]) -> tuple[dict, dict[str, list[int]]]:
    """Per kind and style: flag rates and reasons; and every completed walker's score by kind (no row or no
    score: 100), for the ROC."""
    from studies.authenticity import score_compute
    from studies.models import ParticipantAuthenticity

    rows = {
        row.participant.external_id: row
        for row in ParticipantAuthenticity.objects.filter(participant__study__slug=SLUG).select_related(
            "participant"
        )
    }
    scores: dict[str, list[int]] = {}
    out: dict = {}
    groups: dict[tuple[str, str], list[Walker]] = {}
    for walker in walkers:
        groups.setdefault((walker.kind, "all"), []).append(walker)
        groups.setdefault((walker.kind, walker.style), []).append(walker)
    for (kind, style), members in sorted(groups.items()):
        done = [w for w in members if w.completed]
        flagged = without_picture = without_stylesheet = no_row = 0
        reasons: dict[str, int] = {}
        picture = {"passed": 0, "failed": 0, "neither": 0}
        for walker in done:
            row = rows.get(walker.pid)
            if row is None:
                no_row += 1
                if style != "all":
                    scores.setdefault(kind, []).append(100)
                continue
            if style != "all":
                scores.setdefault(kind, []).append(100 if row.score is None else row.score)
            flagged += row.flagged
            without_picture += score_compute(
                client=row.client, pages=row.pages, pairs=row.pairs, answers=row.answers, loaded=row.loaded
            ).flagged
            without_stylesheet += score_compute(
                client=row.client, pages=row.pages, pairs=row.pairs, picture=row.picture, answers=row.answers
            ).flagged
            if row.picture in picture:
                picture[row.picture] += 1
            for reason in row.reasons:
                reasons[_head(reason)] = reasons.get(_head(reason), 0) + 1
        n = len(done)
        out.setdefault(kind, {})[style] = {
            "walkers": len(members),
            "started": sum(w.started for w in members),
            "completed": n,
            "flagged": flagged,
            "flag_rate": round(flagged / n, 3) if n else None,
            "flag_rate_without_picture": round(without_picture / n, 3) if n else None,
            # Recomputed as if the consent page's stylesheet had been fetched (what that reason adds).
            "flag_rate_without_stylesheet": round(without_stylesheet / n, 3) if n else None,
            "picture": picture,
            "no_row": no_row,
            "reasons": dict(sorted(reasons.items())),
            "example": _example(rows.get(done[0].pid)) if done and style != "all" else None,
        }
    return out, scores


def _example(row) -> dict | None:
    """One participant's stored signals, for a reader of the report: their browser and two of their pages."""
    if row is None:
        return None
    return {"client": row.client, "pages": dict(list(row.pages.items())[:3]), "answers": row.answers}


def roc(scores: dict[str, list[int]]) -> dict:
    """The flag rate of people and of agents (agents and posters) at each threshold (flagged: score below it),
    and the area under that curve."""
    people = scores.get("people", [])
    agents = scores.get("agents", []) + scores.get("posters", [])
    if not people or not agents:
        return {}
    points = []
    for threshold in range(0, 105, 5):
        points.append(
            {
                "flag_below": threshold,
                "people": round(sum(s < threshold for s in people) / len(people), 3),
                "agents": round(sum(s < threshold for s in agents) / len(agents), 3),
            }
        )
    # AUC: the chance that an agent scores below a person (ties count half).
    wins = sum((a < p) + 0.5 * (a == p) for a in agents for p in people)
    return {"auc": round(wins / (len(agents) * len(people)), 3), "points": points}


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
    parser.add_argument("--kind", choices=["rating", "pairwise"], default="rating")
    parser.add_argument("--per-kind", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--compression", type=float, default=0.1)
    parser.add_argument(
        "--people-slip",
        type=float,
        default=0.041,
        help="a person answers the picture check otherwise than it asks (Affonso 2026: 4.1 %% of Prolific people)",
    )
    parser.add_argument(
        "--picture",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the picture check with its sound (the researcher's choice, on here)",
    )
    parser.add_argument(
        "--styles", default="", help="only these styles, comma-separated (e.g. pointer,plain)"
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        help="seconds after which no further walker starts (the report says how many did)",
    )
    parser.add_argument("--latency-participants", type=int, default=60)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/3")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args(argv)
    args.slug = SLUG
    args.labels = list(RATING if args.kind == "rating" else PAIR)
    started = time.monotonic()
    fast_ms = max(1, round(FAST_PAGE_MS * args.compression))
    env = {"AUTHENTICITY_FAST_PAGE_MS": str(fast_ms), "RATELIMIT_PARTICIPANT": "600"}
    with Stack(workers=args.workers, redis_url=args.redis_url, extra_env=env, name="authenticity") as stack:
        stack.django_setup()
        from django.conf import settings

        settings.AUTHENTICITY_FAST_PAGE_MS = fast_ms  # this process recomputes scores too (flag_rates)
        settings.RATELIMIT_PARTICIPANT = 600
        settings.RATELIMIT_TRUSTED_PROXIES = 1  # as the server's: each latency client its own address
        seeded, latent = study_prepare(stack, args)
        stack.start_server()
        walkers = walkers_make(args, latent)
        log(f"{len(walkers)} walkers, {args.concurrency} at a time, pauses × {args.compression}")
        browser_started = time.monotonic()
        errors = (
            asyncio.run(browser_phase(stack.base_url, walkers, args.concurrency, args.time_limit))
            if walkers
            else {}
        )
        browser_seconds = time.monotonic() - browser_started
        rates, scores = flag_rates(walkers)
        log(
            f"flag rates: {json.dumps({k: {s: g['flag_rate'] for s, g in v.items()} for k, v in rates.items()})}"
        )
        latency: dict = {"signals_record_per_answer": {}}
        if args.kind == "rating" and args.latency_participants:
            log("latency phase")
            try:
                latency = latency_phase(args.latency_participants)
            except Exception as exc:  # the browser phase's figures are still printed, with the error
                latency = {"error": f"{type(exc).__name__}: {exc}", "signals_record_per_answer": {}}
    added_p99 = latency["signals_record_per_answer"].get("p99_ms")
    styles = {(kind, style): group for kind, groups in rates.items() for style, group in groups.items()}
    agents = {f"{k}:{s}": g["flag_rate"] for (k, s), g in styles.items() if k != "people" and s != "all"}
    people = {s: g["flag_rate"] for (k, s), g in styles.items() if k == "people" and s != "all"}
    result = {
        "must_show": {
            "agent_flag_rates": agents,
            "agent_flag_rates_without_picture": {
                f"{k}:{s}": g["flag_rate_without_picture"]
                for (k, s), g in styles.items()
                if k != "people" and s != "all"
            },
            "people_flag_rates": people,
            "roc": roc(scores),
            "added_server_ms_per_answer_p99": added_p99,
        },
        "goals": {
            "every_agent_kind_ge_0_80": bool(agents)
            and all(r is not None and r >= 0.8 for r in agents.values()),
            "each_people_kind_le_0_05": bool(people)
            and all(r is not None and r <= 0.05 for r in people.values()),
            "added_latency_p99_lt_5_ms": added_p99 is not None and added_p99 < 5
            if args.kind == "rating"
            else None,
        },
        "kinds": rates,
        "walker_errors": errors,
        "latency": latency,
        "answers": calibration(latent, pairs=args.kind == "pairwise"),
        "setup": {
            "kind": args.kind,
            "study": seeded,
            "picture_check": args.picture,
            "per_kind": args.per_kind,
            "concurrency": args.concurrency,
            "time_limit_seconds": args.time_limit,
            "compression": args.compression,
            "fast_page_ms_threshold_used": fast_ms,
            "people_picture_slip_probability": args.people_slip,
            "gunicorn_workers": args.workers,
            "browser_seconds": round(browser_seconds, 1),
            "total_seconds": round(time.monotonic() - started, 1),
            "load_average_1min_end": round(os.getloadavg()[0], 1),
        },
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
