"""Where a gunicorn worker's CPU goes on the participant flow at saturation: cProfile in every worker (py-spy
is not installed on this machine), the flow driven as bench/participants.py drives it.

    .venv/bin/python bench/profile_participants.py [--mode in_place|form] [--seconds 20] [--concurrency 6]

Prints the top functions by cumulative and by own time over all workers (stdout), and server CPU per request
kind is left to bench/participants.py. cProfile slows Python code down (about 1.5-2x on this code), so the
shares matter here, not the absolute times.
"""

from __future__ import annotations

import argparse
import io
import os
import pstats
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lib.journey import Recorder  # noqa: E402
from bench.lib.stack import DEFAULT_CORPUS, Stack, log  # noqa: E402
from bench.lib.study import study_seed  # noqa: E402
from bench.participants import flow_slice  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=["in_place", "form"], default="in_place")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/6"))
    args = parser.parse_args(argv)
    profile_dir = tempfile.mkdtemp(prefix="empathy-profile-")
    with Stack(
        workers=args.workers, redis_url=args.redis_url, extra_env={"PROFILE_DIR": profile_dir}
    ) as stack:
        stack.django_setup()
        study_seed(stack, slug="launch", corpus=DEFAULT_CORPUS, ask_teq=False, quota_per_condition=100_000)
        config = Path(__file__).resolve().parent / "lib" / "gunicorn_profile.py"
        stack.start_server("--config", str(config))
        recorder = Recorder()
        requests, answers = flow_slice(
            stack,
            recorder=recorder,
            outcomes=[],
            slug="launch",
            concurrency=args.concurrency,
            seconds=args.seconds,
            seed=7,
            in_place=args.mode == "in_place",
        )
        log(f"{requests} requests, {answers} answers in {args.seconds:.0f}s ({args.mode}); stopping workers")
    files = [str(p) for p in Path(profile_dir).glob("*.prof")]
    stats = pstats.Stats(*files, stream=(out := io.StringIO()))
    stats.strip_dirs().sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(args.top)
    print(f"{requests} requests ({answers} answers) profiled in {len(files)} workers, mode {args.mode}")
    print(out.getvalue())


if __name__ == "__main__":
    main()
