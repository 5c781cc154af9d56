"""Re-run the published study on two new models against its stored human baseline, end to end, and print the
figures as one JSON object.

What it does, as a study admin would: import the published ratings (`import_ratings`), extend the study with two
new LLM conditions (`study_extend`), point them at a loopback provider that speaks OpenAI's chat-completions wire
format (no internet needed), generate their responses (`generate_responses`), launch the wave, send simulated
participants through the real participant pages (entry, consent, instructions, TEQ, every item), and analyse the
wave (`analyze`): each new condition against the published human baseline, and the drift test of the re-rated
baseline. It reports the human ratings the wave needs against a full re-run of the same design.

Usage (Django's test database is created from DATABASE_URL — `test_<name>` on a PostgreSQL server, in memory
on SQLite, the default of `make run` — and dropped at the end; nothing is written into DATABASE_URL's own
database):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/empathy REDIS_URL=redis://127.0.0.1:6379/0 \
        .venv/bin/python scripts/wave_demo.py [--participants 30] [--out DIR] [--dataset FILE]

The test suite runs the same steps (tests/analysis/test_wave_published.py) through `wave_demo_run`, on the
published file's first 20 raters per condition (200 prompts: a tenth of the generation, the same design).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARENT, WAVE = "published", "published-w1"
NEW_CONDITIONS = ("gpt5", "llama4")
KEY_VARIABLE = "WAVE_DEMO_API_KEY"
# The loopback models' replies: one per model, so the two new conditions show different texts.
REPLIES = {
    "gpt5": "That sounds really hard. I'm sorry you're going through this; do you want to talk about it?",
    "llama4": "Oh no, that is rough. Hang in there!",
}
_HIDDEN = re.compile(r'<input type="hidden" name="(?P<name>[^"]+)" value="(?P<value>[^"]*)"')


def default_dataset() -> str:
    """The published ratings: PUBLISHED_RATINGS_CSV, else shared/data beside the checkout."""
    return os.environ.get("PUBLISHED_RATINGS_CSV") or str(
        ROOT.parent / "shared" / "data" / "llm-empathy-evaluation" / "dataset_and_ratings.csv"
    )


# --- the loopback provider --------------------------------------------------------------------------------


class _OpenAIHandler(BaseHTTPRequestHandler):
    """POST /v1/chat/completions answered in OpenAI's wire format (the model's reply from REPLIES)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart (delayed ACK)

    def do_POST(self):  # noqa: N802 — http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        model = str(body.get("model", ""))
        text = REPLIES.get(model.removesuffix("-loopback"), "I'm sorry to hear that.")
        # A reply of its own to each prompt, as a model's would be (the same reply to every prompt is flagged for
        # review once a condition is generated): the end of what the model was sent, echoed.
        said = next(
            (m.get("content", "") for m in reversed(body.get("messages", [])) if m.get("role") == "user"), ""
        )
        text = f"{text} You said: “…{' '.join(str(said).split()[-12:])}”"
        self._send(
            200,
            {
                "id": "chatcmpl-loopback",
                "object": "chat.completion",
                "created": 1700000000,
                "model": model,
                "system_fingerprint": "fp_loopback",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 120, "completion_tokens": 20, "total_tokens": 140},
            },
        )

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):  # noqa: A002 — quiet
        return


@contextmanager
def loopback_provider() -> Iterator[str]:
    """A provider on 127.0.0.1 speaking OpenAI's chat-completions format; yields its base URL (…/v1)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OpenAIHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


# --- participants through the real pages ------------------------------------------------------------------


def _hidden(html: str) -> dict[str, str]:
    return {m["name"]: m["value"] for m in _HIDDEN.finditer(html) if m["name"] != "csrfmiddlewaretoken"}


def participant_walk(client, slug: str, pid: str, answer: Callable[[str], int]) -> int:
    """One simulated participant: entry link, consent, instructions, TEQ when asked, every item (each page read
    for its hidden fields, as the browser's form carries them); `answer(position)` gives an item's rating.
    Returns the items rated."""
    step_url = f"/s/{slug}/step/"
    page = client.get(f"/s/{slug}/", {"PROLIFIC_PID": pid, "STUDY_ID": "st", "SESSION_ID": "se"}, follow=True)
    rated = 0
    for _ in range(200):  # a participant has a bounded number of pages
        fields = _hidden(page.content.decode())
        step = fields.get("step")
        token = client.cookies["csrftoken"].value if "csrftoken" in client.cookies else ""
        data = {"csrfmiddlewaretoken": token, **fields}
        if step == "consent":
            data["decision"] = "agree"
        elif step == "teq":
            data.update({f"teq_{n}": "often" for n in range(1, 17)})
        elif step == "items":
            data["value"] = str(answer(fields.get("position", "")))
            rated += 1
        elif step is None:
            return rated  # the completion page: no form
        page = client.post(step_url, data, follow=True)
        if page.status_code != 200:
            raise RuntimeError(f"{pid}: step {step} answered {page.status_code}")
    raise RuntimeError(f"{pid}: still not done after 200 pages")


# --- the demo ---------------------------------------------------------------------------------------------


def wave_demo_run(
    *,
    provider_url: str,
    participants: int,
    out_dir: Path,
    dataset: str,
    bootstrap: int = 500,
    threads: int = 4,
):
    """The demo's steps (see the module docstring) in the current database; returns the figures it reports.
    Needs Django set up, and the test environment's host (`testserver`) allowed. `threads` > 1 generates on a
    pool of threads, each with its own database connection (so the data must be committed, not in a test's
    transaction)."""
    from django.core.management import call_command
    from django.test import Client

    from generation.models import LLMConditionConfig, Provider
    from generation.ratelimit import limit_spec_for, limiter_reset
    from kinds.rating import demo as demo_seed
    from kinds.rating.models import Rating
    from studies.models import Study
    from studies.services import study_launch

    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = round(now - clock, 2)
        clock = now

    quiet = {"stdout": io.StringIO(), "stderr": io.StringIO()}
    call_command("import_ratings", PARENT, dataset, **quiet)
    lap("import_ratings")
    extend = ["study_extend", PARENT, WAVE, *(a for name in NEW_CONDITIONS for a in ("--condition", name))]
    call_command(*extend, **quiet)
    wave = Study.objects.get(slug=WAVE)
    # A draft: editable. The published study came without the texts its participants read; the wave's are the
    # rating demo's.
    wave.completion_code = "WAVE1DONE"
    wave.consent_text = wave.consent_text or demo_seed.CONSENT
    wave.instructions_text = wave.instructions_text or demo_seed.INSTRUCTIONS
    wave.save(update_fields=["completion_code", "consent_text", "instructions_text"])
    os.environ.setdefault(KEY_VARIABLE, "sk-loopback-demo")
    provider = Provider.objects.create(
        name="loopback", kind="openai", base_url=provider_url, api_key_env=KEY_VARIABLE, max_concurrency=8,
        requests_per_minute=600_000, tokens_per_minute=100_000_000, timeout_seconds=5.0, max_attempts=3,
        price_input_per_million="2.5", price_output_per_million="10",
    )  # fmt: skip
    limiter_reset(spec=limit_spec_for(provider))
    for name in NEW_CONDITIONS:
        LLMConditionConfig.objects.create(
            condition=wave.conditions.get(name=name), provider=provider, model=f"{name}-loopback", seed=1
        )
    lap("extend")
    call_command(
        "generate_responses", WAVE, "--in-process", "--threads", str(threads), "--no-progress", **quiet
    )
    lap("generate")
    study_launch(study=wave)
    lap("launch")
    rng = random.Random(wave.seed or 1)
    client = Client()
    for i in range(participants):
        client.cookies.clear()
        participant_walk(client, WAVE, f"wave-rater-{i:03d}", lambda _item: rng.choice([1, 2, 2, 3, 3]))
    lap("participants")
    out = io.StringIO()
    call_command("analyze", WAVE, "--out", str(out_dir), "--bootstrap", str(bootstrap), stdout=out)
    lap("analyze")
    return _figures(wave=Study.objects.get(pk=wave.pk), out_dir=out_dir, timings=timings, rating_model=Rating)


def _figures(*, wave, out_dir: Path, timings: dict, rating_model) -> dict:
    import csv

    parent = wave.parent
    per = wave.items_per_participant
    rerate = wave.conditions.get(name__endswith="_rerate")
    new = [c for c in wave.conditions.order_by("position") if c.pk != rerate.pk]
    full = (parent.conditions.count() + len(new)) * parent.quota_per_condition * per
    needed_new = sum(c.effective_quota for c in new) * per
    needed_rerate = rerate.effective_quota * per
    with (out_dir / "main_tests.csv").open(encoding="utf-8") as fh:
        tests = [r for r in csv.DictReader(fh) if r["scope"] == "overall" and " vs " in r["comparison"]]
    with (out_dir / "drift.csv").open(encoding="utf-8") as fh:
        drift = next(csv.DictReader(fh))
    with (out_dir / "distribution.csv").open(encoding="utf-8") as fh:
        ratings = {r["condition"]: int(r["ratings"]) for r in csv.DictReader(fh)}
    design = json.loads((out_dir / "design.json").read_text(encoding="utf-8"))
    top = json.loads(json.dumps(wave.scale))
    top_label = max(top, key=lambda o: o["value"])["label"]

    def number(value: str):
        return None if value in ("", None) else round(float(value), 4)

    return {
        "parent": parent.slug,
        "wave": wave.slug,
        "design_sha256": design["sha256"],
        "new_conditions": [
            {
                "condition": r["comparison"].split(" vs ")[0],
                f"{top_label}_share": number(r["top_share"]),
                f"{top_label}_share_baseline": number(r["top_share_baseline"]),
                "relative_change": number(r["change"]),
                "p": number(r["p"]),
                "p_adjusted": number(r["p_adjusted"]),
                "significant": r["significant"] == "true",
                "ratings": ratings.get(r["comparison"].split(" vs ")[0]),
            }
            for r in tests
            if any(r["comparison"].startswith(f"{c.name} · {wave.slug}") for c in new)
        ],
        "drift": {k: (number(v) if k != "note" else v) for k, v in drift.items()},
        "ratings_collected": rating_model.objects.filter(
            assignment__participant__study=wave, assignment__participant__is_preview=False
        ).count(),
        "participants": wave.participants.filter(status="completed").count(),
        "human_ratings_needed": {
            "wave_at_full_quota": needed_new + needed_rerate,
            "of_which_new_conditions": needed_new,
            "of_which_rerating": needed_rerate,
            "full_rerun_of_the_design": full,
            "goal": len(new) * parent.quota_per_condition * per + needed_rerate,
            "share_of_full_rerun": round((needed_new + needed_rerate) / full, 4),
        },
        "seconds": timings,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--participants", type=int, default=30)
    parser.add_argument("--bootstrap", type=int, default=500)
    parser.add_argument(
        "--threads", type=int, default=1, help="Generation threads (one is fastest on a small busy machine)."
    )
    parser.add_argument("--dataset", default=default_dataset())
    parser.add_argument(
        "--out", default=None, help="Where the analysis is written (default: a temporary dir)."
    )
    args = parser.parse_args(argv)
    if not Path(args.dataset).is_file():
        parser.error(f"no published ratings at {args.dataset} (set --dataset or PUBLISHED_RATINGS_CSV)")
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ENV", "test")
    # 4,000 provider calls: the JSON figures, not a log line each.
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.conf import settings
    from django.test.utils import setup_databases, setup_test_environment, teardown_databases

    setup_test_environment()  # allows the test client's host
    settings.RATELIMIT_ENROLL_PER_STUDY = 100_000  # many people at once
    names = setup_databases(verbosity=0, interactive=False)
    try:
        with loopback_provider() as url, tempfile.TemporaryDirectory() as tmp:
            out_dir = Path(args.out or tmp)
            figures = wave_demo_run(
                provider_url=url,
                participants=args.participants,
                out_dir=out_dir,
                dataset=args.dataset,
                bootstrap=args.bootstrap,
                threads=args.threads,
            )
            figures["analysis_dir"] = str(out_dir) if args.out else None
    finally:
        teardown_databases(names, verbosity=0)
    print(json.dumps(figures, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
