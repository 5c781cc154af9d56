"""Operations: /healthz, request ids, JSON logs, optional error reporting."""

import gzip
import io
import json
import logging
import subprocess
import sys

import pytest
from django.conf import settings
from django.db import connection

pytestmark = pytest.mark.django_db


def test_healthz_reports_database_and_broker_ok(client, redis_url):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["broker"]["ok"] is True
    assert response["Cache-Control"].startswith("max-age=0")


def test_healthz_names_the_broker_when_redis_is_unreachable_and_only_strict_checks_fail(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = client.get("/healthz")
    # Participants keep working without Redis: the web process stays in rotation, degraded.
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    assert body["checks"]["broker"] == {"ok": False, "error": "ConnectionError"}
    assert body["checks"]["database"]["ok"] is True
    strict = client.get("/healthz", {"strict": "1"})
    assert strict.status_code == 503 and strict.json()["status"] == "degraded"


@pytest.mark.django_db(transaction=True)
def test_healthz_is_503_naming_the_database_when_it_is_unreachable(client, redis_url):
    # A real outage: the connection is closed and pointed at a port nothing listens on, then restored.
    original_port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = "1"
    try:
        response = client.get("/healthz")
    finally:
        connection.close()
        connection.settings_dict["PORT"] = original_port
    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["database"] == {"ok": False, "error": "OperationalError"}
    assert body["checks"]["broker"]["ok"] is True
    assert client.get("/healthz").status_code == 200  # and healthy again once it is back


def test_every_response_echoes_a_request_id(client):
    generated = client.get("/healthz")["X-Request-ID"]
    assert len(generated) == 32
    assert client.get("/healthz", headers={"X-Request-ID": "lb-1234.abc"})["X-Request-ID"] == "lb-1234.abc"
    # A header that could forge log lines is replaced, not echoed.
    forged = client.get("/healthz", headers={"X-Request-ID": 'x" \n{"level":"ERROR"}'})["X-Request-ID"]
    assert forged != 'x" \n{"level":"ERROR"}' and len(forged) == 32


def test_access_log_is_one_json_object_per_line_with_request_id_path_status_duration(client):
    # The console handler LOGGING configured, writing into a buffer instead of stderr for the test.
    (handler,) = [h for h in logging.getLogger().handlers if h.get_name() == "console"]
    buffer = io.StringIO()
    original = handler.setStream(buffer)
    try:
        client.get("/healthz", headers={"X-Request-ID": "trace-42"})
        client.get("/no-such-page/")
    finally:
        handler.setStream(original)
    lines = [line for line in buffer.getvalue().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line parses on its own
    access = [e for e in entries if e["logger"] == "access"]
    assert access[0]["request_id"] == "trace-42"
    assert access[0]["path"] == "/healthz" and access[0]["status"] == 200
    assert isinstance(access[0]["duration_ms"], float)
    assert access[1]["status"] == 404
    # Django's own warning about the 404 carries the same request id as the access line.
    not_found = [e for e in entries if e["logger"] == "django.request"]
    assert not_found and not_found[0]["request_id"] == access[1]["request_id"]
    assert handler.formatter.__class__.__name__ == "JsonFormatter"


def test_a_multiline_message_stays_on_one_line():
    from config.logging import JsonFormatter

    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "first\nsecond", None, None)
    line = JsonFormatter().format(record)
    assert "\n" not in line and json.loads(line)["message"] == "first\nsecond"


def test_error_reporting_is_off_without_a_dsn_and_sends_events_to_the_dsn_when_set(httpserver):
    # A fresh interpreter that only reads the settings (as every process does at start): Sentry hooks the
    # process globally, so the suite's own process stays untouched.
    httpserver.expect_request("/api/1/envelope/", method="POST").respond_with_data("{}")
    dsn = f"http://publickey@127.0.0.1:{httpserver.port}/1"
    script = (
        "import sentry_sdk, config.settings as s;"
        "assert sentry_sdk.get_client().is_active() == bool(s.SENTRY_DSN);"
        "sentry_sdk.capture_message('ops test') if s.SENTRY_DSN else None;"
        "sentry_sdk.flush(5)"
    )
    env = {"PATH": "/usr/bin:/bin", "DJANGO_ENV": "test", "VAR_DIR": str(settings.VAR_DIR)}
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=60, cwd=settings.BASE_DIR)
    assert httpserver.log == []
    subprocess.run(
        [sys.executable, "-c", script],
        env={**env, "SENTRY_DSN": dsn},
        check=True,
        timeout=60,
        cwd=settings.BASE_DIR,
    )
    assert len(httpserver.log) == 1
    assert b"ops test" in gzip.decompress(httpserver.log[0][0].get_data())


def test_the_floor_view_writes_one_row_per_request(client):
    from bench.targets.models import FloorWrite

    assert client.post("/bench/floor/").status_code == 200
    assert client.get("/bench/floor/").status_code == 405
    assert FloorWrite.objects.count() == 1


def test_page_ceiling_renders_an_item_page_from_the_session(client):
    first = client.get("/bench/page/")
    assert first.status_code == 200
    page = first.content.decode()
    assert (
        "Item 3 of 10" in page and 'name="csrfmiddlewaretoken"' in page and "contact_me_by_fax_only" in page
    )
    assert client.session.get("ratings:participant:bench") == 0  # stored once, read from then on
    assert client.get("/bench/page/").status_code == 200
    assert client.post("/bench/page/").status_code == 405


_BENCH_TARGETS_PROBE = """
import sys
import django
django.setup()
from django.apps import apps
from django.urls import Resolver404, resolve
try:
    routed = [resolve(path).url_name for path in ("/bench/floor/", "/bench/page/")]
except Resolver404:
    routed = []
loaded = sorted(name for name in sys.modules if name == "bench" or name.startswith("bench."))
print(apps.is_installed("bench.targets"), routed, loaded)
"""


@pytest.mark.parametrize(
    ("enabled", "expected"),
    [
        (None, "False [] []"),
        ("0", "False [] []"),
        (
            "1",
            "True ['bench-floor', 'bench-page'] "
            "['bench', 'bench.targets', 'bench.targets.apps', 'bench.targets.models', 'bench.targets.urls', "
            "'bench.targets.views']",
        ),
    ],
)
def test_production_installs_and_routes_the_benchmark_targets_only_when_the_benchmark_setting_is_on(
    enabled, expected
):
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_ENV": "production",
        "SECRET_KEY": "s" * 60,
        "ALLOWED_HOSTS": "example.org",
        "REDIS_URL": "redis://127.0.0.1:6379/0",
        "VAR_DIR": str(settings.VAR_DIR),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    if enabled is not None:
        env["BENCH_FLOOR_ENABLED"] = enabled
    done = subprocess.run(
        [sys.executable, "-c", _BENCH_TARGETS_PROBE],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=settings.BASE_DIR,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected
