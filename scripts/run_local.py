"""`make run`: seed the demo studies, start the development server, and print the links only once the server
answers (so the first click on a printed link never meets a refused connection).

Usage: python scripts/run_local.py HOST PORT   (the database is migrated before, by the Makefile)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT_SECONDS = 120


def answers(url: str) -> bool:
    """Whether anything (any HTTP status) answers at `url`."""
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(host: str, port: str) -> int:
    signal.signal(signal.SIGTERM, _interrupt)  # stopped by a supervisor (or a test): stop the server too
    env = {**os.environ, "HOST": host, "PORT": port}
    manage = [sys.executable, str(ROOT / "manage.py")]
    seeded = subprocess.run([*manage, "seed_demo"], env=env, cwd=ROOT, capture_output=True, text=True)
    sys.stderr.write(seeded.stderr)
    if seeded.returncode != 0:
        sys.stdout.write(seeded.stdout)
        return seeded.returncode
    # The test model's provider, so a study can be generated and tried with no key and no network.
    subprocess.run([*manage, "seed_test_model"], env=env, cwd=ROOT, check=False)
    server = subprocess.Popen([*manage, "runserver", f"{host}:{port}"], env=env, cwd=ROOT)
    probe_host = "127.0.0.1" if host in {"0.0.0.0", "::"} else host
    probe = f"http://{probe_host}:{port}/healthz"
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    try:
        while not answers(probe):
            if server.poll() is not None:
                print(
                    f"The server stopped before it answered (exit status {server.returncode}).",
                    file=sys.stderr,
                )
                return server.returncode or 1
            if time.monotonic() > deadline:
                print(
                    f"The server did not answer at {probe} within {READY_TIMEOUT_SECONDS} s.", file=sys.stderr
                )
                break
            time.sleep(0.25)
        else:
            print("\nThe site is up.\n" + seeded.stdout, flush=True)
        return server.wait()
    except KeyboardInterrupt:
        server.send_signal(signal.SIGTERM)
        try:
            return server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            return 130


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
