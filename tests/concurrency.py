"""Racing a piece of code against itself on real PostgreSQL: n threads, each on its own connection, released
together by a barrier."""

from __future__ import annotations

import threading

from django.db import connections


def race(target, n: int, *, timeout: float = 60) -> tuple[dict, dict]:
    """Runs target(i) in n threads released together; returns (results, errors), each by thread index (an
    exception in a thread is collected for the test to assert on, never lost)."""
    barrier = threading.Barrier(n)
    results, errors = {}, {}

    def run(i):
        try:
            barrier.wait()
            results[i] = target(i)
        except Exception as exc:  # collected and asserted on by the test
            errors[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    return results, errors
