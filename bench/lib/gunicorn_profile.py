"""A gunicorn config file that profiles every worker with cProfile (bench/profile_participants.py).

CPU time (process_time), so waiting for PostgreSQL or Redis does not count. Sync workers serve each request on their main thread, so a profiler enabled after the fork sees every
request; each worker writes its statistics to $PROFILE_DIR/<pid>.prof when it exits (SIGTERM)."""

import cProfile
import os
import time


def post_fork(server, worker):
    worker.profiler = cProfile.Profile(time.process_time)  # CPU time, not time spent waiting
    worker.profiler.enable()


def worker_exit(server, worker):
    profiler = getattr(worker, "profiler", None)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(os.path.join(os.environ["PROFILE_DIR"], f"{os.getpid()}.prof"))
