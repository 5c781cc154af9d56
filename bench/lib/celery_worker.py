"""The command line of a Celery worker of this project on one queue, as the benchmarks and the tests start one."""

from __future__ import annotations

import sys


def celery_worker_command(*, queue: str, name: str, concurrency: int, loglevel: str = "WARNING") -> list[str]:
    """A thread-pool worker of `concurrency` threads consuming `queue` alone, named `name`, without the
    cluster chatter (mingle, gossip) a lone worker does not need."""
    return [
        *(sys.executable, "-m", "celery", "-A", "config", "worker"),
        *("--pool", "threads", "--concurrency", str(concurrency), "-Q", queue),
        *("--without-mingle", "--without-gossip", "--loglevel", loglevel, "-n", name),
    ]
