"""Shared fixtures.

The suite runs against this machine's real PostgreSQL and Redis (see the Makefile's `test` target). Behaviour that
depends on them (locking, concurrency, the broker, a real Celery worker) is tested for real: with CI=true a
missing service fails the run instead of skipping anything.
"""

import contextlib
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

IN_CI = os.environ.get("CI", "").lower() == "true"


def _postgres_in_use() -> bool:
    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


def pytest_sessionstart(session):
    if IN_CI and not _postgres_in_use():
        raise pytest.UsageError(
            "CI=true: the suite must run on PostgreSQL (set DATABASE_URL; `make test` does)."
        )
    if IN_CI and not settings.REDIS_URL:
        raise pytest.UsageError("CI=true: the suite must run with Redis (set REDIS_URL; `make test` does).")
    if _postgres_in_use():
        _flush_postgres_by_deleting_rows()
    _hash_passwords_cheaply()


# --- Parallel runs (pytest-xdist) -------------------------------------------------------------------------
# `make test` spreads the suite over worker processes (`-n auto` in pyproject.toml's addopts): much of it waits on
# Chromium, a live server, a Celery worker or a subprocess, so even two cores run three workers to advantage
# (docs/development.md has the measurements). Each worker has a PostgreSQL test database of its own (pytest-django
# suffixes its name with the worker's id: test_empathy_gw0, ...), and a Redis database and a VAR_DIR of its own
# (`pytest_xdist_setupnodes`), so nothing one worker's tests keep there (rate-limit counts, sessions, the broker's
# queues, the beat leader's key, media files) is seen by another's.
# Serial unless PYTEST_XDIST_AUTO_NUM_WORKERS asks for workers: the race tests open up to 52 PostgreSQL connections
# at once, and beside two other workers' live servers and Celery workers they passed PostgreSQL's default
# max_connections (100) in one of three parallel runs ("too many clients"). With max_connections raised (or the
# race tests given the database to themselves), 3 workers take the suite from ~20 min to ~11 min on 2 cores.
WORKERS = 0


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config):
    """The worker processes `-n auto` starts: PYTEST_XDIST_AUTO_NUM_WORKERS when it is set; otherwise WORKERS, or
    for a run that names test files (or tests in them) one worker a file up to WORKERS, and none (the tests run
    in this process) for a single file, where starting workers would cost more than it saves."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    named = {Path(config.invocation_params.dir, arg.split("::")[0]) for arg in config.args}
    if all(path.is_file() for path in named):
        return 0 if len(named) <= 1 else min(WORKERS, len(named))
    return WORKERS


def pytest_xdist_setupnodes(config, specs):
    """Before the workers start: each gets REDIS_URL's database counted down by its number (gw0 the given one,
    gw1 the one below, ...) and a VAR_DIR under var/test-workers/. The processes a test starts (Celery workers,
    servers) inherit both."""
    redis_url = os.environ.get("REDIS_URL", "")
    for spec in specs:
        number = int(spec.id.removeprefix("gw"))
        if redis_url:
            spec.env["REDIS_URL"] = _worker_redis_url(redis_url, number)
        spec.env["VAR_DIR"] = str(Path(settings.VAR_DIR) / "test-workers" / spec.id)


def _worker_redis_url(url: str, number: int) -> str:
    parts = urllib.parse.urlsplit(url)
    database = int(parts.path.strip("/") or 0) - number
    if database < 0:
        raise pytest.UsageError(
            f"REDIS_URL={url}: worker gw{number} would need Redis database {database}. The workers take the"
            " given database and those below it: give a higher one, or fewer workers (-n)."
        )
    return urllib.parse.urlunsplit(parts._replace(path=f"/{database}"))


def _hash_passwords_cheaply():
    """Passwords the tests set and sign in with are hashed with Django's fast test hasher (MD5) first.

    Production's PBKDF2 takes 0.45 s a hash on the development machine, by design, and the suite hashes a
    password each time it creates a user with one (`staff_user`, the browser tests' researchers) and each time
    someone signs in, or fails to. No test checks the hashing algorithm; production's settings are untouched
    (tests/test_settings.py checks them in a process of their own). PBKDF2 stays listed, so its hashes still
    verify."""
    from django.test.utils import override_settings

    override_settings(
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher", *settings.PASSWORD_HASHERS]
    ).enable()


def _flush_postgres_by_deleting_rows():
    """Make the flush that ends each transactional test delete rows instead of running Django's one TRUNCATE.

    TRUNCATE gives each of the ~50 tables new files, empty or not: 1.5–2 s a test on the development machine,
    over 150 transactional tests. A test leaves a few rows in a few tables, and deleting them costs
    milliseconds; the tables end just as empty (Django flushes SQLite the same way). The foreign keys Django
    creates are deferrable: deferred, the deletes run in any order and are checked at the flush's commit, when
    every row is gone. A flush that resets sequences or cascades keeps Django's TRUNCATE.

    The content types and permissions `migrate` creates are kept: no test writes them, and deleted, they were
    created again after every flush (Django's post_migrate handlers, which still run and now find them all
    there), half of each flush's time."""
    from django.db import IntegrityError
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush
    kept = {"django_content_type", "auth_permission"}

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade or not tables:
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        deletes = [
            f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(t))};"
            for t in tables
            if t not in kept
        ]
        return ["SET CONSTRAINTS ALL DEFERRED;", *deletes]

    DatabaseOperations.sql_flush = sql_flush

    execute = DatabaseOperations.execute_sql_flush

    def execute_sql_flush(self, sql_list):
        """A request a browser sent as the test closed its page (the beacon that carries a participant's consent
        and instructions on pagehide) can still be writing while the flush runs: a row it commits after its
        table was emptied, pointing at a row the flush deletes, fails the flush's deferred foreign-key check at
        commit (TRUNCATE's table locks made such a request wait instead). The flush is then run again, and
        deletes that row too."""
        for attempt in range(3):
            try:
                return execute(self, sql_list)
            except IntegrityError:
                if attempt == 2:
                    raise

    DatabaseOperations.execute_sql_flush = execute_sql_flush


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """A transactional test (real commits: races, live_server, Celery workers) ends by flushing every table,
    which also removes the rows data migrations seeded (the 32 emotions). Put them back once the test's
    teardown, flush included, is over, so later tests see the database exactly as `migrate` leaves it."""
    result = yield
    marker = item.get_closest_marker("django_db")
    fixtures = getattr(item, "fixturenames", ())
    # After the last test the test database is already gone: nothing to restore.
    if nextitem is not None and (
        (marker is not None and marker.kwargs.get("transaction"))
        or any(name in fixtures for name in ("transactional_db", "live_server"))
    ):
        import importlib

        from django.apps import apps
        from django.db import transaction
        from pytest_django.plugin import blocking_manager_key

        # One transaction, as in the migration (not a commit per emotion).
        with item.config.stash[blocking_manager_key].unblock(), transaction.atomic():
            importlib.import_module("studies.migrations.0002_seed_emotions").seed_emotions(apps, None)
    return result


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, with the sessions the run leaves behind ended before it is dropped.

    The live server's threads keep their connections open while a browser holds its keep-alive socket (the
    site's CONN_MAX_AGE), and a few others outlive their test, idle. PostgreSQL's DROP DATABASE waits five
    seconds for them and then fails, which left the test database behind and the run 5 s longer."""
    yield
    if _postgres_in_use():
        from django.db import connection

        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )


@pytest.fixture(autouse=True)
def _enrollment_limits_out_of_the_way(settings):
    """Most tests enroll many participants at once, all from 127.0.0.1, and the limiter's counts in the suite's
    Redis outlive each test: at the default 30 entries a minute an address, a fast stretch of the suite got 429
    on its next entry. The limits stay on (the same code path and Redis round trip as in production) but high;
    they are tested on their own (tests/ops/test_participant_entry_guard.py, tests/ratelimits.py), which set
    them low again."""
    settings.RATELIMIT_ENROLL_PER_STUDY = 100_000
    settings.RATELIMIT_ENTRY_PER_IP = 100_000


@pytest.fixture
def httpserver(make_httpserver):
    """pytest-httpserver's loopback provider, left idle when the test ends. It answers one request at a time, so
    a request of our own returns only after a handler still running (a provider made to hang past the client's
    timeout) has finished and been logged; without this, that late entry lands in a later test's log."""
    server = make_httpserver
    server.clear()
    yield server
    with contextlib.suppress(OSError):  # no handler answers it: a 500, once the server is free
        urllib.request.urlopen(server.url_for("/_idle"), timeout=30).close()
    server.clear()


@pytest.fixture
def requires_postgres():
    """For tests whose behaviour depends on PostgreSQL (row locks, concurrent transactions)."""
    if not _postgres_in_use():
        if IN_CI:
            pytest.fail("This test needs PostgreSQL and CI=true forbids skipping it.")
        pytest.skip("needs PostgreSQL: run through `make test`")


@pytest.fixture
def redis_url():
    """The real Redis of this machine (a database of its own for the suite)."""
    import redis

    url = settings.REDIS_URL
    if not url:
        if IN_CI:
            pytest.fail("This test needs Redis and CI=true forbids skipping it.")
        pytest.skip("needs Redis: run through `make test`")
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as exc:
        pytest.fail(f"Redis at {url} does not answer: {exc}")
    return url


def free_port() -> int:
    """A TCP port nothing listens on now, chosen by the system (so two suites side by side never pick the same)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def throwaway_redis():
    """A Redis of our own on a free port, answering once the fixture returns: stopping it, or writing to it,
    disturbs nobody (neither this suite's Redis database nor another suite's). Yields (process, url)."""
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(50):
        try:
            redis.Redis.from_url(url).ping()
            break
        except redis.exceptions.ConnectionError:
            time.sleep(0.1)
    yield proc, url
    proc.kill()
    proc.wait()


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_user(
        username="admin", password="admin-pass-123", is_staff=True, is_superuser=True
    )


@pytest.fixture
def staff_client(client, staff_user):
    client.force_login(staff_user)
    return client


# --- Browser tests ------------------------------------------------------------------------------------
# Debian's Chromium driven by Playwright (Playwright cannot download its own browser on these machines).
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    # navigator.webdriver false natively: a person's browser surface needs no script of ours (`page_at`).
    "--disable-blink-features=AutomationControlled",
]


@pytest.fixture(scope="session")
def browser():
    from django.urls import reverse
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium is missing at {CHROMIUM}: `make test` installs Debian's chromium package.")
    # The whole URLconf (and the modules its views import) loaded once, up front: otherwise the first page the
    # run's first browser test opens pays for those imports and can run into the navigation timeout.
    reverse("ratings:entry", kwargs={"slug": "warm-up"})
    # Playwright's sync API runs an event loop in this thread; the ORM calls the tests make around it are
    # ordinary synchronous calls, so Django's async-safety guard does not apply.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            yield chromium
            chromium.close()
    finally:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


@pytest.fixture
def phone_page(browser):
    """A phone-sized touch viewport (iPhone 12-like)."""
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True, has_touch=True
    )
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


# The viewports the participant pages are checked on: a common phone, a small phone, a desktop.
VIEWPORTS = {"phone": (390, 844), "small-phone": (360, 640), "desktop": (1280, 800)}
# A person's browser: Chromium under Playwright says "HeadlessChrome" and has a headless window (the screen the
# page's size); a person's does not. navigator.webdriver is off for every page (CHROMIUM_ARGS).
DESKTOP_UA = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"
)


@pytest.fixture
def page_at(browser):
    """A factory of pages: `page_at("small-phone")`, `page_at("desktop", javascript=False)`. Phones are touch
    devices. `person=True`: the browser says what a person's says (no "HeadlessChrome", no webdriver flag, a
    desktop's screen larger than the page), for the authenticity score. Every context it opens is closed after the test."""
    contexts = []

    def make(viewport: str = "phone", *, javascript: bool = True, person: bool = False):
        width, height = VIEWPORTS[viewport]
        phone = viewport != "desktop"
        context = browser.new_context(
            viewport={"width": width, "height": height},
            is_mobile=phone,
            has_touch=phone,
            java_script_enabled=javascript,
            user_agent=DESKTOP_UA if person else None,
            **({"screen": {"width": 1920, "height": 1080}} if person and not phone else {}),
        )
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(10_000)
        return page

    yield make
    for context in contexts:
        context.close()
