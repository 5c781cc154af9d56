"""Abuse in the production shape: slow clients and oversized bodies, behind nginx and straight at gunicorn.

Starts the production shape (DJANGO_ENV=production, gunicorn with 4 sync workers, PostgreSQL, Redis; see
bench/lib/stack.py) and Debian's nginx in front of it with the repository's own proxy configuration
(deploy/nginx/default.conf.template, ports filled in). Then, once through nginx and once straight at gunicorn
(the baseline, as the site ran before the proxy):

* slow clients: 50 connections held open for 60 s (half send a POST body a byte a second, half their headers
  a byte a second; a connection the server closes is opened again at once) while /healthz and a
  participant's rating page are timed back to back: p50, p99, max, failures;
* bodies: a 100 MB multipart POST to /admin/login/ (and, through nginx, a 100 MB chunked one): the status,
  and how much of the body had been sent when the answer came (refused before it was read: a few %);
* security (bench/lib/security.py): a staff user naming the recruiting token or an internal address as a
  provider's key or URL, Test connection of a row written around the form, webhook replays, future times and
  bad bytes, a corpus CSV with a NUL byte, expired / study-limited analyst tokens and drafts, pseudonymised
  exports, an 11-character password, Permissions-Policy and HSTS, the login lock-out per username and
  address, one password guessed from 20 addresses (throttled; the owner still signs in from a known
  address), a webhook to a study whose secret variable is unset (a generic 503), and idle sign-out: each
  answer's status and words, and what changed (`--security-only` skips the slow-client and body phases).

Prints one JSON object. Never restarts or stops PostgreSQL or Redis; everything it starts it stops.

    python bench/abuse.py [--hold-seconds 60] [--slow-clients 50] [--redis-url redis://127.0.0.1:6379/5]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lib.browser import Browser  # noqa: E402
from bench.lib.security import PROBE_ENV, security_phase  # noqa: E402
from bench.lib.stack import BASE_DIR, Stack, free_port, log  # noqa: E402
from bench.lib.study import study_seed  # noqa: E402

NGINX = os.environ.get("NGINX", "/usr/sbin/nginx")
NGINX_TEMPLATE = BASE_DIR / "deploy" / "nginx" / "default.conf.template"
MB = 1024 * 1024


# --- nginx ----------------------------------------------------------------------------------------------


class Proxy:
    """Debian's nginx with the repository's site configuration, in a temporary prefix."""

    def __init__(self, upstream: str) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.dir = Path(tempfile.mkdtemp(prefix="empathy-nginx-"))
        self.process: subprocess.Popen | None = None
        site = NGINX_TEMPLATE.read_text()
        site = site.replace("${NGINX_PORT}", f"127.0.0.1:{self.port}").replace("${NGINX_UPSTREAM}", upstream)
        (self.dir / "site.conf").write_text(site)
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.dir / sub).mkdir()
            (self.dir / sub).chmod(0o777)  # nginx's worker processes may run as another user
        self.dir.chmod(0o755)
        temp = " ".join(f"{sub}_temp_path {self.dir / sub};" for sub in ("fastcgi", "uwsgi", "scgi"))
        (self.dir / "nginx.conf").write_text(
            f"""daemon off;
worker_processes 2;
pid {self.dir / "nginx.pid"};
error_log {self.dir / "error.log"} warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {self.dir / "body"};
    proxy_temp_path {self.dir / "proxy"};
    {temp}
    include {self.dir / "site.conf"};
}}
"""
        )

    def start(self) -> None:
        if not Path(NGINX).exists():
            subprocess.run(["bash", str(BASE_DIR / "scripts" / "ensure-nginx")], check=True)
        subprocess.run(
            [NGINX, "-t", "-q", "-c", str(self.dir / "nginx.conf"), "-p", str(self.dir)], check=True
        )
        log(f"nginx on {self.base_url}")
        self.process = subprocess.Popen(
            [NGINX, "-c", str(self.dir / "nginx.conf"), "-p", str(self.dir)], start_new_session=True
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.base_url}/healthz", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"nginx did not come up: {(self.dir / 'error.log').read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGQUIT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)


# --- a participant at their rating page -------------------------------------------------------------------


class Participant:
    """One participant (own cookies, as bench/lib/browser.py keeps them), walked to their first rating page."""

    def __init__(self, base_url: str, slug: str, pid: str) -> None:
        self.slug = slug
        self.browser = Browser(base_url, client_ip="198.51.100.7", record=lambda *_: None, timeout=30)
        entry = self.browser.request(
            "entry", "GET", f"/s/{slug}/?PROLIFIC_PID={pid}&STUDY_ID=abuse&SESSION_ID={pid}s"
        )
        # The entry answers with the consent page itself (and sets the CSRF cookie); an older entry redirected.
        if entry.status not in (200, 302):
            raise RuntimeError(f"entry answered {entry.status}: {entry.body[:300]}")
        if entry.status == 302:
            self.browser.request("consent", "GET", f"/s/{slug}/step/")
        self._post({"step": "consent", "decision": "agree"})
        self._post({"step": "instructions"})
        body = self.rating_page()
        if 'name="step" value="items"' not in body:
            raise RuntimeError(f"not at a rating page: {body[:400]}")

    def _post(self, data: dict) -> None:
        token = self.browser.cookies["csrftoken"]
        sent = self.browser.request(
            "step", "POST", f"/s/{self.slug}/step/", {"csrfmiddlewaretoken": token, **data}
        )
        if sent.status != 302:
            raise RuntimeError(f"POST {data} answered {sent.status}: {sent.body[:600]}")

    def rating_page(self) -> str:
        """One GET of the rating page, no retry (a slow or failed answer is what is measured)."""
        status, _headers, body = self.browser._once("GET", f"/s/{self.slug}/step/", None, None)
        if status != 200:
            raise OSError(f"rating page answered {status}")
        return body


# --- slow clients ---------------------------------------------------------------------------------------


def _slow_socket(port: int, kind: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.setblocking(False)
    if kind == "body":
        sock.send(
            b"POST /admin/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\n"
        )
    else:
        sock.send(b"GET /admin/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    return sock


class SlowClients(threading.Thread):
    """`count` connections, each sending one byte a second; a closed one is opened again at once."""

    def __init__(self, port: int, count: int) -> None:
        super().__init__(daemon=True)
        self.port, self.count = port, count
        self.stop_event = threading.Event()
        self.reopened = 0
        self.connect_failures = 0

    def run(self) -> None:
        kinds = ["body" if i % 2 == 0 else "headers" for i in range(self.count)]
        sockets: list[socket.socket | None] = [None] * self.count
        while not self.stop_event.is_set():
            for i, kind in enumerate(kinds):
                sock = sockets[i]
                try:
                    if sock is None:
                        sockets[i] = _slow_socket(self.port, kind)
                        continue
                    readable, _, _ = select.select([sock], [], [], 0)
                    if readable and not sock.recv(65536, socket.MSG_PEEK):
                        raise ConnectionResetError  # the server closed it
                    if readable:
                        sock.recv(65536)  # an answer (408, 400): the server gave up on it
                        raise ConnectionResetError
                    sock.send(b"a" if kind == "body" else b"X")
                except OSError:
                    if sock is not None:
                        sock.close()
                        self.reopened += 1
                    try:
                        sockets[i] = _slow_socket(self.port, kind)
                    except OSError:
                        sockets[i] = None
                        self.connect_failures += 1
            self.stop_event.wait(1.0)
        for sock in sockets:
            if sock is not None:
                sock.close()


def _summary(samples: list[float], failures: int) -> dict:
    ordered = sorted(samples)
    if not ordered:
        return {"requests": 0, "failures": failures}
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {
        "requests": len(ordered),
        "failures": failures,
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p99_ms": round(p99 * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


def slow_client_phase(base_url: str, participant: Participant, *, clients: int, hold: float) -> dict:
    """Holds `clients` slow connections for `hold` seconds while timing /healthz and the rating page."""
    port = int(base_url.rsplit(":", 1)[1])
    slow = SlowClients(port, clients)
    slow.start()
    time.sleep(2)  # let them connect
    timings: dict[str, list[float]] = {"healthz": [], "rating_page": []}
    failures = {"healthz": 0, "rating_page": 0}
    deadline = time.monotonic() + hold
    while time.monotonic() < deadline:
        for name in ("healthz", "rating_page"):
            started = time.monotonic()
            try:
                if name == "healthz":
                    with urllib.request.urlopen(f"{base_url}/healthz", timeout=30) as response:
                        response.read()
                else:
                    participant.rating_page()
            except (OSError, http.client.HTTPException):
                failures[name] += 1
            timings[name].append(time.monotonic() - started)
        time.sleep(0.1)
    slow.stop_event.set()
    slow.join(10)
    return {
        **{name: _summary(timings[name], failures[name]) for name in timings},
        "slow_connections": clients,
        "held_seconds": hold,
        "slow_connections_reopened": slow.reopened,
        "slow_connect_failures": slow.connect_failures,
    }


# --- big bodies ---------------------------------------------------------------------------------------


def big_body(base_url: str, *, size: int = 100 * MB, chunked: bool = False) -> dict:
    """Sends a `size`-byte multipart POST to /admin/login/ as fast as the server takes it, watching for the
    answer; reports the status and how much had been sent when it came."""
    port = int(base_url.rsplit(":", 1)[1])
    # A real form post: the CSRF cookie and token first, so that a server that reads bodies reads this one.
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/admin/login/", headers={"Host": f"127.0.0.1:{port}"})
    login_page = connection.getresponse()
    login_page.read()
    set_cookies = login_page.headers.get_all("Set-Cookie") or []
    cookie = next((c.split(";", 1)[0] for c in set_cookies if c.startswith("csrftoken=")), "")
    connection.close()
    token = cookie.partition("=")[2].encode()
    boundary = b"abuseboundary"
    head = (
        b"--"
        + boundary
        + b'\r\nContent-Disposition: form-data; name="csrfmiddlewaretoken"\r\n\r\n'
        + token
        + b"\r\n--"
        + boundary
        + b'\r\nContent-Disposition: form-data; name="f"; filename="big.bin"\r\n\r\n'
    )
    length_header = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: " + str(size).encode()
    request = (
        b"POST /admin/login/ HTTP/1.1\r\nHost: 127.0.0.1:"
        + str(port).encode()
        + b"\r\nCookie: "
        + cookie.encode()
        + b"\r\nContent-Type: multipart/form-data; boundary="
        + boundary
        + b"\r\n"
        + length_header
        + b"\r\n\r\n"
    )
    piece = b"\0" * (256 * 1024)
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setblocking(False)
    started = time.monotonic()
    pending = request + (b"%x\r\n%s\r\n" % (len(head), head) if chunked else head)
    sent_body = len(head)
    answer = b""
    finished_sending = False
    while time.monotonic() - started < 120:
        readable, writable, _ = select.select([sock], [] if finished_sending else [sock], [], 5)
        if readable:
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            answer += data
            if b"\r\n\r\n" in answer:
                break
        if writable and not finished_sending:
            try:
                n = sock.send(pending)
            except OSError:
                finished_sending = True  # the server closed its side: read what it answered
                continue
            pending = pending[n:]
            if not pending:
                if sent_body >= size:
                    finished_sending = True
                    if chunked:
                        sock.send(b"0\r\n\r\n")
                else:
                    step = min(len(piece), size - sent_body)
                    pending = (b"%x\r\n%s\r\n" % (step, piece[:step])) if chunked else piece[:step]
                    sent_body += step
    seconds = time.monotonic() - started
    sock.close()
    status_line = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    status = int(status_line.split()[1]) if len(status_line.split()) > 1 else None
    return {
        "status": status,
        "body_mb": round(size / MB),
        "chunked": chunked,
        "sent_mb_when_answered": round(sent_body / MB, 1),
        "sent_fraction_when_answered": round(sent_body / size, 3),
        "seconds": round(seconds, 2),
    }


# --- main -----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hold-seconds", type=float, default=60.0)
    parser.add_argument("--slow-clients", type=int, default=50)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/6"))
    parser.add_argument("--skip-direct", action="store_true", help="no baseline straight at gunicorn")
    parser.add_argument("--security-only", action="store_true", help="only the security probes")
    args = parser.parse_args(argv)

    slug = "abuse"
    extra_env = {
        # This bench is about slow clients and bodies, not request rates: the probes may be fast.
        "RATELIMIT_PARTICIPANT": "1000000",
        "RATELIMIT_ENTRY_PER_IP": "1000000",
        **PROBE_ENV,
    }
    result: dict = {"workers": args.workers, "nginx_config": str(NGINX_TEMPLATE.relative_to(BASE_DIR))}
    with Stack(workers=args.workers, redis_url=args.redis_url, extra_env=extra_env, name="abuse") as stack:
        stack.django_setup()
        study_seed(stack, slug=slug, corpus=Path("/nonexistent"), ask_teq=False, quota_per_condition=1000)
        stack.start_server()
        proxy = Proxy(upstream=f"127.0.0.1:{stack.port}")
        try:
            proxy.start()
            targets = [("proxied", proxy.base_url)] + (
                [] if args.skip_direct else [("direct", stack.base_url)]
            )
            raw_pid = "probesecurity"
            Participant(proxy.base_url, slug, raw_pid)  # a participant whose platform id exports must hide
            result["security"] = security_phase(
                stack, proxied=proxy.base_url, direct=stack.base_url, slug=slug, raw_pid=raw_pid
            )
            if args.security_only:
                targets = []
            for name, base_url in targets:
                timeouts_before = stack.log_path.read_text(errors="replace").count("WORKER TIMEOUT")
                log(f"{name}: {args.slow_clients} slow clients for {args.hold_seconds:.0f}s")
                participant = Participant(base_url, slug, f"probe{name}")
                for _ in range(args.workers * 5):  # every worker has rendered the rating page once
                    participant.rating_page()
                phase = slow_client_phase(
                    base_url, participant, clients=args.slow_clients, hold=args.hold_seconds
                )
                stack.wait_healthy(timeout=120)  # the baseline may leave workers being replaced
                log(f"{name}: 100 MB multipart POST")
                phase["multipart_100mb"] = big_body(base_url)
                if name == "proxied":
                    phase["chunked_100mb"] = big_body(base_url, chunked=True)
                stack.wait_healthy(timeout=120)
                timeouts = stack.log_path.read_text(errors="replace").count("WORKER TIMEOUT")
                phase["gunicorn_worker_timeouts"] = timeouts - timeouts_before
                result[name] = phase
        finally:
            proxy.stop()
    if "proxied" in result:
        goal = 200.0
        proxied = result["proxied"]
        result["goal_p99_ms"] = goal
        result["proxied_meets_goal"] = all(
            proxied[name].get("p99_ms", 1e9) < goal and proxied[name]["failures"] == 0
            for name in ("healthz", "rating_page")
        )
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
