"""The security probes of bench/abuse.py, against the production shape (DJANGO_ENV=production).

Each probe tries one thing issue #41 named and reports what the server answered (HTTP status, and the words or
header that show the refusal) and what changed (rows stored, requests that reached a listener of ours standing in
for an attacker's host). Run through nginx, except where a probe must vary the client address (the login lock-out:
straight at gunicorn, with X-Forwarded-For as a trusted proxy would send it) or send X-Forwarded-Proto itself (HSTS).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import http.client
import json
import re
import socket
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

from .stack import Stack, log

ADMIN, ADMIN_PASSWORD = "probe-admin", "probe-admin-password-2026"
WEBHOOK_SECRET = "probe-webhook-secret-0123456789"
UNSET_SECRET_ENV = "PROLIFIC_PROBE_UNSET_SECRET"  # a study's webhook secret variable that is not set
# Read by the stack's processes: the recruiting credential a staff user must never be able to exfiltrate.
PROBE_ENV = {
    "PROLIFIC_TOKEN": "probe-prolific-token-that-pays",
    "PROLIFIC_WEBHOOK_SECRET": WEBHOOK_SECRET,
    "LOCAL_API_KEY": "probe-local-key",
    "OPENAI_API_KEY": "probe-openai-key",
    "ACCOUNT_IDLE_TIMEOUT_SECONDS": "20",
}


class Listener(threading.Thread):
    """A host of the attacker's: counts connections and keeps the Authorization headers it received."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.authorizations: list[str] = []

    def run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.settimeout(2)
            try:
                data = conn.recv(65536).decode(errors="replace")
                self.authorizations += re.findall(r"(?im)^authorization:\s*(.+?)\r?$", data)
                conn.sendall(
                    b"HTTP/1.1 500 Internal\r\nContent-Length: 27\r\n\r\nINTERNAL-ONLY metadata body"
                )
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self.sock.close()


class Client:
    """A cookie-keeping HTTP client for one origin (http.client, no retries: every answer is what is measured)."""

    def __init__(self, base_url: str, *, forwarded_for: str = "", headers: dict | None = None) -> None:
        parts = urllib.parse.urlsplit(base_url)
        self.host, self.port = parts.hostname, parts.port
        self.cookies: dict[str, str] = {}
        self.extra = {**({"X-Forwarded-For": forwarded_for} if forwarded_for else {}), **(headers or {})}

    def request(self, method: str, path: str, *, data=None, body: bytes | None = None, headers=None):
        headers = {"Host": f"{self.host}:{self.port}", **self.extra, **(headers or {})}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if data is not None:
            body = urllib.parse.urlencode(data).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if method == "POST" and "csrftoken" in self.cookies:
            headers.setdefault("Referer", f"http://{self.host}:{self.port}{path}")
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read().decode(errors="replace")
            for value in response.headers.get_all("Set-Cookie") or []:
                name, _, rest = value.partition("=")
                self.cookies[name] = rest.split(";", 1)[0]
            return response.status, response.headers, text
        finally:
            connection.close()

    def form(self, path: str, fields: dict) -> tuple[int, object, str]:
        """GET the page (for the CSRF cookie), then POST `fields` with its token."""
        self.request("GET", path)
        return self.request(
            "POST", path, data={"csrfmiddlewaretoken": self.cookies.get("csrftoken", ""), **fields}
        )

    def login(self, username: str = ADMIN, password: str = ADMIN_PASSWORD) -> int:
        return self.form("/admin/login/?next=/admin/", {"username": username, "password": password})[0]


SETUP = """
import json
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone
from analysis.models import AnalystToken
from analysis.tokens import analyst_token_issue
from generation.models import Provider
from recruiting.models import ProlificStudy
from studies.models import Study
User = get_user_model()
User.objects.create_superuser("{admin}", "", "{password}")
analyst = User.objects.create_user("probe-analyst")
analyst.groups.add(Group.objects.get_or_create(name="Analysts")[0])
live = Study.objects.get(slug="{slug}")
draft = Study.objects.create(slug="probe-draft", title="A draft", state=Study.State.DRAFT)
expired = analyst_token_issue(user=analyst)
AnalystToken.objects.filter(user=analyst).update(expires_at=timezone.now() - timedelta(seconds=1))
keys = dict(expired=expired, scoped=analyst_token_issue(user=analyst, study=draft), broad=analyst_token_issue(user=analyst))
ProlificStudy.objects.create(study=live, prolific_study_id="probe-study", site_url="https://studies.example.org",
    prolific_name="x", prolific_description="x", reward=100, estimated_minutes=5)
ProlificStudy.objects.create(study=draft, prolific_study_id="probe-unset", site_url="https://studies.example.org",
    prolific_name="x", prolific_description="x", reward=100, estimated_minutes=5,
    webhook_secret_env="{unset_secret}")
provider = Provider.objects.create(name="probe-around-the-form", kind="openai",
    base_url="http://127.0.0.1:{listener}/v1", api_key_env="LOCAL_API_KEY", timeout_seconds=3, max_attempts=1)
print(json.dumps(dict(keys=keys, provider=provider.pk, live=live.slug, draft=draft.slug)))
"""

COUNTS = (
    "import json; from generation.models import Provider; from recruiting.models import WebhookEvent; "
    "from django.contrib.auth import get_user_model; "
    "print(json.dumps(dict(providers=Provider.objects.count(), webhook_events=WebhookEvent.objects.count(), "
    "users=get_user_model().objects.count())))"
)


def _provider_form(**overrides) -> dict:
    return {
        "name": "probe",
        "kind": "openai",
        "base_url": "https://api.openai.com/v1",
        "api_key_env": "OPENAI_API_KEY",
        "requests_per_minute": 60,
        "tokens_per_minute": 100000,
        "max_concurrency": 2,
        "timeout_seconds": 5,
        "max_attempts": 1,
        "price_input_per_million": 0,
        "price_output_per_million": 0,
        **overrides,
    }


def _error_text(page: str) -> str:
    found = re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', page, re.S)
    return (
        re.sub(r"<[^>]+>", " ", " ".join(found)).replace("&#x27;", "'").replace("&quot;", '"').strip()[:300]
    )


def _signed(payload: dict, *, event_id: str, sent: float, raw: bytes | None = None) -> tuple[bytes, dict]:
    body = raw if raw is not None else json.dumps(payload).encode()
    stamp = str(int(sent))
    signature = base64.b64encode(
        hmac.new(WEBHOOK_SECRET.encode(), stamp.encode() + body, hashlib.sha256).digest()
    )
    return body, {
        "Content-Type": "application/json",
        "X-Prolific-Request-Signature": signature.decode(),
        "X-Prolific-Request-Timestamp": stamp,
        "X-Event-ID": event_id,
        "X-Timestamp": str(sent),
    }


def security_phase(stack: Stack, *, proxied: str, direct: str, slug: str, raw_pid: str) -> dict:
    """Every probe; returns their figures (see the module's docstring)."""
    listener = Listener()
    listener.start()
    setup = json.loads(
        stack.manage(
            "shell",
            "-c",
            SETUP.format(
                admin=ADMIN,
                password=ADMIN_PASSWORD,
                slug=slug,
                listener=listener.port,
                unset_secret=UNSET_SECRET_ENV,
            ),
        )
        .strip()
        .splitlines()[-1]
    )
    counts = lambda: json.loads(stack.manage("shell", "-c", COUNTS).strip().splitlines()[-1])  # noqa: E731
    before = counts()
    out: dict = {}
    staff = Client(proxied)
    assert staff.login() == 302, "the probe's admin could not sign in"

    log("security: provider keys and outbound addresses")
    cases = {
        "recruiting_token_as_key": _provider_form(name="p1", api_key_env="PROLIFIC_TOKEN"),
        "vendor_key_to_own_host": _provider_form(
            name="p2", base_url=f"https://attacker.example:{listener.port}/v1"
        ),
        "unbound_key_to_loopback": _provider_form(
            name="p3", api_key_env="LOCAL_API_KEY", base_url=f"http://127.0.0.1:{listener.port}/v1"
        ),
    }
    for url in (
        "http://169.254.169.254/latest/",
        "http://[fd00:ec2::254]/v1",
        "http://0.0.0.0:8000/v1",
        "http://metadata.google.internal/v1",
        "http://2852039166/v1",
        "http://0xa9fea9fe/v1",
        "http://10.0.0.7/v1",
    ):
        cases[f"url {url}"] = _provider_form(name="p4", api_key_env="LOCAL_API_KEY", base_url=url)
    provider_cases = {}
    for name, fields in cases.items():
        status, _headers, page = staff.form("/admin/generation/provider/add/", fields)
        provider_cases[name] = {
            "status": status,
            "refused": status == 400 and bool(_error_text(page)),
            "says": _error_text(page),
        }
    out["provider_form"] = provider_cases
    status, _headers, page = staff.form(
        f"/admin/generation/provider/{setup['provider']}/test/", {"model": "m"}
    )
    said = re.search(r"It does not work yet\.</strong>\s*(.*?)</li>", page, re.S)
    out["test_connection_row_written_around_the_form"] = {
        "status": status,
        "says": html.unescape(re.sub(r"\s+", " ", said.group(1)).strip())[:300] if said else "",
        "listener_connections": listener.connections,
        "listener_saw_a_key": bool(listener.authorizations),
        "target_body_echoed": "INTERNAL-ONLY" in page,
    }

    log("security: webhooks")
    hook = f"/recruiting/prolific/webhook/{slug}/"
    event = {"event_type": "study.status.change", "resource_id": "probe-study", "status": "PAUSED"}
    client = Client(proxied)
    now = time.time()
    body, headers = _signed(event, event_id="probe-1", sent=now)
    webhooks = {"genuine": client.request("POST", hook, body=body, headers=headers)[0]}
    status, _h, text = client.request(
        "POST", hook, body=body, headers={**headers, "X-Event-ID": "probe-replay"}
    )
    webhooks["replay_new_event_id"] = {"status": status, "says": text[:120]}
    body_f, headers_f = _signed({**event, "status": "ACTIVE"}, event_id="probe-future", sent=now + 10**7)
    status, _h, text = client.request("POST", hook, body=body_f, headers=headers_f)
    webhooks["signed_time_now_plus_1e7_s"] = {"status": status, "says": text[:120]}
    body_l, headers_l = _signed({**event, "status": "ACTIVE"}, event_id="e" * 101, sent=now)
    webhooks["event_id_101_chars"] = {
        "status": (answer := client.request("POST", hook, body=body_l, headers=headers_l))[0],
        "says": answer[2][:120],
    }
    raw = b'{"event_type": "study.status.change", "resource_id": "probe-study", "status": "A\\u0000"}'
    body_n, headers_n = _signed({}, event_id="probe-nul", sent=now, raw=raw)
    webhooks["json_with_nul"] = {
        "status": (answer := client.request("POST", hook, body=body_n, headers=headers_n))[0],
        "says": answer[2][:120],
    }
    body_u, headers_u = _signed(event, event_id="probe-unset", sent=now)
    status, _h, text = client.request(
        "POST", f"/recruiting/prolific/webhook/{setup['draft']}/", body=body_u, headers=headers_u
    )
    webhooks["secret_unset"] = {
        "status": status,
        "says": text[:120],
        "names_the_variable": UNSET_SECRET_ENV in text or "environment variable" in text,
    }
    out["webhooks"] = webhooks

    log("security: a corpus CSV with a NUL byte")
    with tempfile.NamedTemporaryFile("wb", suffix=".csv", delete=False) as handle:
        handle.write(b"dialog_id,emotion,situation\nhit:0_conv:0,sad,My d\x00og\n")
    try:
        stack.manage("import_corpus", "probe-nul-corpus", handle.name)
        out["corpus_csv_with_nul"] = {"refused": False}
    except RuntimeError as exc:
        says = next((line for line in str(exc).splitlines() if "NUL" in line), str(exc)[-200:])
        out["corpus_csv_with_nul"] = {"refused": True, "exit_nonzero": True, "says": says.strip()[:200]}
    finally:
        Path(handle.name).unlink()

    log("security: analyst tokens and exports")
    keys = setup["keys"]
    api = lambda key, path: Client(proxied, headers={"Authorization": f"Token {key}"}).request("GET", path)  # noqa: E731
    participants_csv = api(keys["broad"], f"/api/studies/{slug}/exports/participants.csv")
    out["api_tokens"] = {
        "expired_token": api(keys["expired"], f"/api/studies/{slug}/")[0],
        "study_token_on_another_study": api(keys["scoped"], f"/api/studies/{slug}/")[0],
        "broad_token_on_a_draft": api(keys["broad"], f"/api/studies/{setup['draft']}/")[0],
        "broad_token_on_a_live_study": api(keys["broad"], f"/api/studies/{slug}/")[0],
        "export_for_an_analyst_has_raw_platform_id": raw_pid in participants_csv[2],
        "export_pseudonyms_like": sorted(set(re.findall(r"\bP[0-9a-f]{16}\b", participants_csv[2])))[:1],
    }

    log("security: passwords, headers, lock-out, idle sign-out")
    status, _h, page = staff.form(
        "/admin/auth/user/add/",
        {
            "username": "probe-short",
            "password1": "Tr0ub4dor&3",
            "password2": "Tr0ub4dor&3",
            "usable_password": "true",
        },
    )
    out["password_of_11_characters"] = {
        "status": status,
        "refused": status == 400 and bool(_error_text(page)),
        "says": _error_text(page),
    }
    _s, login_headers, _t = Client(proxied).request("GET", "/admin/login/")
    _s, https_headers, _t = Client(direct, headers={"X-Forwarded-Proto": "https"}).request(
        "GET", "/admin/login/"
    )
    out["headers"] = {
        "permissions_policy": login_headers.get("Permissions-Policy"),
        "strict_transport_security": https_headers.get("Strict-Transport-Security"),
    }
    owner = Client(direct, forwarded_for="203.0.113.11")
    assert owner.login() == 302, "the owner could not sign in from their address"
    owner = Client(direct, forwarded_for="203.0.113.11")  # signed out: a fresh session, same address
    flood = Client(direct, forwarded_for="203.0.113.10")
    statuses = [
        flood.form("/admin/login/", {"username": ADMIN, "password": f"wrong-{i}"})[0] for i in range(11)
    ]
    out["login_lockout"] = {
        "wrong_passwords_from_one_address": statuses,
        "right_password_from_that_address": flood.login(),
        "right_password_from_a_known_address": owner.login(),
    }
    stack.manage("axes_reset")
    guesses = [
        Client(direct, forwarded_for=f"198.51.100.{i}").form(
            "/admin/login/", {"username": ADMIN, "password": f"guess-{i}"}
        )[0]
        for i in range(1, 21)
    ]
    owner = Client(direct, forwarded_for="203.0.113.11")
    out["distributed_guessing"] = {
        "addresses": len(guesses),
        "one_wrong_password_each": guesses,
        "throttled_after": next((i for i, code in enumerate(guesses) if code == 429), None),
        "right_password_from_a_new_address": Client(direct, forwarded_for="192.0.2.50").login(),
        "right_password_from_a_known_address": owner.login(),
    }
    stack.manage("axes_reset")
    idle = Client(proxied)
    idle.login()
    first = idle.request("GET", "/admin/")[0]
    time.sleep(int(PROBE_ENV["ACCOUNT_IDLE_TIMEOUT_SECONDS"]) + 2)
    status, headers, _t = idle.request("GET", "/admin/")
    out["idle_sign_out"] = {
        "idle_seconds": int(PROBE_ENV["ACCOUNT_IDLE_TIMEOUT_SECONDS"]) + 2,
        "before": first,
        "after": status,
        "sent_to": headers.get("Location", ""),
    }

    after = counts()
    out["rows_added"] = {k: after[k] - before[k] for k in after}
    listener.close()
    out["attacker_host_connections"] = listener.connections
    out["attacker_host_saw_a_key"] = bool(listener.authorizations)
    return out
