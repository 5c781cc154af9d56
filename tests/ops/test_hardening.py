"""Request bodies, login throttling, the API docs, the CSP and the health check in the production shape."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.test import Client

pytestmark = pytest.mark.django_db

BASE_DIR = Path(__file__).resolve().parents[2]
MB = 1024 * 1024


class CountingStream:
    """A request body that counts what the server reads of it (an endless multipart file part)."""

    def __init__(self):
        self.read_bytes = 0
        self._head = b'--x\r\nContent-Disposition: form-data; name="f"; filename="big.bin"\r\n\r\n'

    def read(self, size=-1):
        size = 64 * 1024 if size is None or size < 0 else size
        chunk = (self._head + b"\0" * size)[:size]
        self._head = self._head[len(chunk) :]
        self.read_bytes += len(chunk)
        return chunk

    def readline(self, size=-1):
        return self.read(size)


# --- request bodies -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/admin/login/", "/s/demo/step/", "/analysis/login/"])
def test_a_100_mb_multipart_post_is_refused_before_any_of_it_is_read(path):
    body = CountingStream()
    response = Client().generic(
        "POST",
        path,
        content_type="multipart/form-data; boundary=x",
        **{"CONTENT_LENGTH": str(100 * MB), "wsgi.input": body},
    )
    assert response.status_code == 413
    assert body.read_bytes == 0
    assert "too much to send" in response.content.decode()


def test_every_content_type_has_the_limit(settings):
    settings.REQUEST_BODY_MAX_BYTES = 1000
    for content_type in ("application/json", "text/plain", "application/octet-stream"):
        body = CountingStream()
        response = Client().generic(
            "POST",
            "/s/demo/step/",
            content_type=content_type,
            **{"CONTENT_LENGTH": "1001", "wsgi.input": body},
        )
        assert (response.status_code, body.read_bytes) == (413, 0), content_type


def test_the_corpus_import_has_its_own_larger_limit(staff_client, settings):
    settings.REQUEST_BODY_MAX_BYTES = 1000
    settings.REQUEST_BODY_MAX_IMPORT_BYTES = 5000
    ok = staff_client.post("/admin/studies/study/import/", {"slug": "x" * 1200})
    assert ok.status_code != 413
    too_big = staff_client.generic(
        "POST",
        "/admin/studies/study/import/",
        content_type="multipart/form-data; boundary=x",
        **{"CONTENT_LENGTH": "5001", "wsgi.input": CountingStream()},
    )
    assert too_big.status_code == 413


# --- login throttling ---------------------------------------------------------------------------------


@pytest.mark.parametrize("login_path", ["/admin/login/", "/analysis/login/"])
def test_after_100_wrong_passwords_the_right_one_is_refused_until_the_lock_out_ends(login_path, staff_user):
    known = Client(REMOTE_ADDR="203.0.113.7")
    assert known.post(login_path, {"username": "admin", "password": "admin-pass-123"}).status_code == 302
    known.logout()
    client = Client()
    codes = [
        client.post(login_path, {"username": "admin", "password": f"wrong-{i}"}).status_code
        for i in range(100)
    ]
    assert codes[: django_settings.AXES_FAILURE_LIMIT - 1] == [200] * (django_settings.AXES_FAILURE_LIMIT - 1)
    assert set(codes[django_settings.AXES_FAILURE_LIMIT :]) == {429}
    right = client.post(login_path, {"username": "admin", "password": "admin-pass-123"})
    assert right.status_code == 429
    assert "Too many failed sign-ins" in right.content.decode()
    assert "_auth_user_id" not in client.session
    # Another username from the flooding address is refused too; but the flood did not lock `admin` out
    # everywhere: from an address it signed in from before, the right password still signs in.
    assert client.post(login_path, {"username": "someone", "password": "x"}).status_code == 429
    assert known.post(login_path, {"username": "admin", "password": "admin-pass-123"}).status_code == 302

    call_command("axes_reset")  # or the cool-off (AXES_COOLOFF_MINUTES) passing
    back = Client().post(login_path, {"username": "admin", "password": "admin-pass-123"})
    assert back.status_code == 302


def test_guessing_one_password_from_15_addresses_is_throttled_but_the_owner_signs_in_from_a_known_address(
    staff_user,
):
    owner = Client(REMOTE_ADDR="198.51.100.1")
    assert owner.post("/admin/login/", {"username": "admin", "password": "admin-pass-123"}).status_code == 302
    owner.logout()
    codes = [
        Client(REMOTE_ADDR=f"203.0.113.{i}")
        .post("/admin/login/", {"username": "admin", "password": f"guess-{i}"})
        .status_code
        for i in range(1, 16)
    ]
    limit = django_settings.AXES_FAILURE_LIMIT
    assert codes[: limit - 1] == [200] * (limit - 1) and set(codes[limit:]) == {429}
    # The right password from a new address is refused while the guessing lasts; from the owner's it is not.
    fresh = Client(REMOTE_ADDR="192.0.2.50")
    assert fresh.post("/admin/login/", {"username": "admin", "password": "admin-pass-123"}).status_code == 429
    assert owner.post("/admin/login/", {"username": "admin", "password": "admin-pass-123"}).status_code == 302
    # Other usernames from those addresses are not held back by admin's count.
    other = Client(REMOTE_ADDR="203.0.113.20")
    assert other.post("/admin/login/", {"username": "someone", "password": "x"}).status_code == 200


def test_signing_in_at_the_analysis_login_without_next_lands_on_a_real_page(staff_user):
    client = Client()
    response = client.post(
        "/analysis/login/", {"username": "admin", "password": "admin-pass-123"}, follow=True
    )
    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == "/analysis/"


# --- API docs and CSP ---------------------------------------------------------------------------------


def test_the_schema_and_docs_are_for_staff_and_analysts_only(client, staff_client):
    for path in ("/api/schema/", "/api/docs/", "/api/docs/?script="):
        assert Client().get(path).status_code in (401, 403), path
        assert staff_client.get(path).status_code == 200, path


def test_swagger_ui_is_served_from_our_static_files_with_no_inline_script(staff_client):
    html = staff_client.get("/api/docs/").content.decode()
    assert "cdn" not in html.lower() and "@latest" not in html
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "<script>" not in html.replace(" ", "")  # every script has a src
    script = staff_client.get("/api/docs/?script=")
    assert script["Content-Type"].startswith("application/javascript")


def test_options_on_the_docs_is_not_a_server_error(staff_client):
    assert staff_client.options("/api/docs/").status_code < 500
    assert Client().options("/api/docs/").status_code < 500


@pytest.mark.parametrize("path", ["/", "/s/nope/", "/admin/login/", "/analysis/login/", "/healthz"])
def test_every_page_has_a_content_security_policy_without_inline_scripts(path):
    policy = Client().get(path)["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
    assert directives["script-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in directives["script-src"]


# --- the health check in the production shape ---------------------------------------------------------


def test_healthz_answers_under_a_real_allowed_hosts_and_the_ssl_redirect(settings):
    settings.ALLOWED_HOSTS = ["studies.example.org"]
    settings.SECURE_SSL_REDIRECT = True
    # What docker-compose's check sends: plain HTTP, to the container's own address.
    assert Client().get("/healthz", HTTP_HOST="127.0.0.1:8000").status_code == 200
    # Every other page still refuses the unknown host and redirects to HTTPS.
    assert Client().get("/", HTTP_HOST="127.0.0.1:8000").status_code == 400
    assert Client().get("/", HTTP_HOST="studies.example.org").status_code == 301


_PRODUCTION_PROBE = """
import django, json
django.setup()
from django.test import Client
client = Client()
print(json.dumps({
    "healthz": client.get("/healthz", HTTP_HOST="127.0.0.1:8000").status_code,
    "home_by_ip": client.get("/", HTTP_HOST="127.0.0.1:8000").status_code,
    "home_http": client.get("/", HTTP_HOST="studies.example.org").status_code,
    "home_https": client.get("/", HTTP_HOST="studies.example.org", secure=True).status_code,
}))
"""


def test_the_health_check_passes_with_the_production_settings_compose_uses():
    """The real settings module under DJANGO_ENV=production with compose's defaults for the proxy."""
    db = django_settings.DATABASES["default"]
    env = {
        **{k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG"}},
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_ENV": "production",
        "SECRET_KEY": "p" * 60,
        "ALLOWED_HOSTS": "studies.example.org",
        "SECURE_SSL_REDIRECT": "true",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "REDIS_URL": django_settings.REDIS_URL,
        "VAR_DIR": os.environ.get("VAR_DIR", str(BASE_DIR / "var")),
        "LOG_LEVEL": "ERROR",
    }
    done = subprocess.run(
        [sys.executable, "-c", _PRODUCTION_PROBE],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"healthz": 200, "home_by_ip": 400, "home_http": 301, "home_https": 200}
