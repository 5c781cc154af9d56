"""Writers racing readers, each on its own database connection (PostgreSQL)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connections


def writers_against_readers(
    write: Callable[[int], None], writers: int, read: Callable[[], object], readers: int = 3
):
    """Runs write(0..writers-1) in threads while `readers` threads call read() again and again until every
    writer is done; returns (what the readers returned, the exceptions raised anywhere)."""
    writing = threading.Event()
    writing.set()
    seen, errors = [], []

    def reading() -> None:
        while writing.is_set():
            seen.append(read())

    def run(target, *args):
        try:
            target(*args)
        except Exception as exc:  # handed to the caller, who asserts on them
            errors.append(exc)
        finally:
            connections.close_all()

    reader_threads = [threading.Thread(target=run, args=(reading,)) for _ in range(readers)]
    writer_threads = [threading.Thread(target=run, args=(write, i)) for i in range(writers)]
    for thread in reader_threads + writer_threads:
        thread.start()
    for thread in writer_threads:
        thread.join(120)
    writing.clear()
    for thread in reader_threads:
        thread.join(120)
    return seen, errors
