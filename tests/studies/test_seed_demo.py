"""seed_demo: the live demo study and an admin login, idempotent; and `make run`'s set-up on a fresh SQLite file."""

import io
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db.models import Count

from studies.models import AttentionCheck, Study
from studies.services import study_launch_problems

from .helpers import row_counts, sqlite_manage

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(
    r"^Rating participant link: http://127\.0\.0\.1:(\d+)/s/demo/\?PROLIFIC_PID=demo-[0-9a-f]+&STUDY_ID=demo&SESSION_ID=[0-9a-f]+$",
    re.M,
)
QUESTIONNAIRE_LINK = re.compile(
    r"^Questionnaire participant link: http://127\.0\.0\.1:(\d+)/s/feelings-demo/\?PROLIFIC_PID=demo-[0-9a-f]+"
    r"&STUDY_ID=feelings-demo&SESSION_ID=[0-9a-f]+$",
    re.M,
)
ADMIN = re.compile(r"^Admin: http://127\.0\.0\.1:(\d+)/admin/  user admin  password (\S+)$", re.M)


def seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_seed_demo_creates_a_live_demo_study_and_an_admin_and_a_second_run_changes_nothing(
    settings, tmp_path
):
    settings.VAR_DIR = tmp_path
    first = seed()
    study = Study.objects.get(slug="demo")
    assert study.state == Study.State.LIVE
    assert study.prompts.count() == 64
    assert list(study.conditions.order_by("position").values_list("name", flat=True)) == [
        "human",
        "chatgpt",
        "chatgpt_empathy",
    ]
    per_emotion = set(study.prompts.values("emotion").annotate(n=Count("id")).values_list("n", flat=True))
    assert per_emotion == {2}
    assert (
        study.rating_settings.ask_teq
        and study.rating_settings.target_ratings_per_response == 3
        and study.items_per_participant == 10
        and len(study.worked_examples) == 3
    )
    assert study.completion_code and study.screened_out_code and study.failed_checks_code
    assert study.completion_redirect_url == ""
    assert AttentionCheck.objects.filter(study=study).count() == 1
    assert study_launch_problems(study=study) == []

    password = ADMIN.search(first).group(2)
    assert (tmp_path / "demo-admin-password").read_text().strip() == password
    assert oct((tmp_path / "demo-admin-password").stat().st_mode & 0o777) == "0o600"
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(password)
    assert LINK.search(first)

    published = Study.objects.get(slug="published-sample")
    assert published.state == Study.State.CLOSED and published.prompts.count() == 300
    raters = published.participants.annotate(n=Count("assignments__rating")).values_list("n", flat=True)
    assert len(raters) == 90 and set(raters) == {10}
    assert "/analysis/published-sample/" in first

    questionnaire = Study.objects.get(slug="feelings-demo")
    assert questionnaire.kind == Study.Kind.QUESTIONNAIRE and questionnaire.state == Study.State.LIVE
    assert (
        questionnaire.consent_text.strip()
        and questionnaire.questionnaire_settings.instrument.items.count() == 20
    )
    assert questionnaire.study_situations.count() == 5
    assert study_launch_problems(study=questionnaire) == []
    assert QUESTIONNAIRE_LINK.search(first)
    pairwise = Study.objects.get(slug="pairs-demo")
    assert pairwise.kind == "pairwise" and pairwise.state == Study.State.LIVE
    assert re.search(
        r"^Pairwise participant link: http://127\.0\.0\.1:\d+/s/pairs-demo/\?PROLIFIC_PID=", first, re.M
    )

    counts = row_counts()
    second = seed()
    assert row_counts() == counts
    assert ADMIN.search(second).group(2) == password
    assert LINK.search(second) and QUESTIONNAIRE_LINK.search(second)
    assert get_user_model().objects.get(username="admin").password == admin.password


@pytest.mark.django_db
def test_the_printed_port_follows_the_environment(settings, tmp_path, monkeypatch):
    settings.VAR_DIR = tmp_path
    monkeypatch.setenv("PORT", "8765")
    out = seed()
    assert LINK.search(out).group(1) == "8765"
    assert ADMIN.search(out).group(1) == "8765"


def test_make_runs_setup_migrates_and_seeds_a_fresh_sqlite_file(sqlite_var):
    """`make run`'s migrate is the `sqlite_migrated` fixture's (it fails the test if it fails)."""
    manage = sqlite_manage(sqlite_var)
    first = manage("seed_demo")
    second = manage("seed_demo")
    assert LINK.search(first) and LINK.search(second)
    assert ADMIN.search(first).group(2) == ADMIN.search(second).group(2)
    with sqlite3.connect(sqlite_var / "db.sqlite3") as db:
        assert db.execute("select state from studies_study where slug = 'demo'").fetchall() == [("live",)]
        demo = "(select id from studies_study where slug = 'demo')"
        assert db.execute(f"select count(*) from studies_prompt where study_id = {demo}").fetchone() == (64,)
        assert db.execute(
            f"select count(*) from studies_response r join studies_prompt p on p.id = r.prompt_id "
            f"where p.study_id = {demo}"
        ).fetchone() == (192,)
        assert db.execute(
            "select s.state, count(*) from studies_rating r join studies_assignment a on a.id = r.assignment_id "
            "join studies_participant pt on pt.id = a.participant_id join studies_study s on s.id = pt.study_id "
            "where s.slug = 'published-sample' group by s.state"
        ).fetchall() == [("closed", 900)]
        assert db.execute("select count(*) from auth_user where username = 'admin'").fetchone() == (1,)


@pytest.mark.django_db
def test_the_questionnaire_demo_keeps_an_imported_emotionbench_pool_as_it_is(settings, tmp_path):
    """The demo's situations sit beside the pool (their own factor numbers): seeding overwrites nothing."""
    from studies.models import Situation

    settings.VAR_DIR = tmp_path
    pool = Situation.objects.create(
        emotion="Anger", factor_index=1, factor_name="Facing", index=1, text="Pool text."
    )
    seed()
    pool.refresh_from_db()
    assert pool.text == "Pool text." and pool.factor_name == "Facing"
    assert not Study.objects.get(slug="feelings-demo").study_situations.filter(situation=pool).exists()


def test_make_run_prints_the_links_only_once_the_server_answers_and_each_log_line_once(sqlite_var):
    """scripts/run_local.py (what `make run` starts after migrating; here on a copy of the migrated file): the
    links come after the server answers, and a warning is logged once (one JSON line, not a plain-text copy)."""
    import json
    import signal
    import socket
    import urllib.error
    import urllib.request

    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "PORT"}}
    env.update({"DJANGO_ENV": "local", "VAR_DIR": str(sqlite_var), "PYTHONUNBUFFERED": "1"})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = sqlite_var / "stderr.log"
    with open(log, "w") as stderr:
        server = subprocess.Popen(
            [sys.executable, "scripts/run_local.py", "127.0.0.1", str(port)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            printed = []
            for line in server.stdout:
                printed.append(line)
                if line.startswith("Rating participant link:"):
                    # Printed only now: the server must already answer.
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
                        assert answer.status == 200
                if line.startswith("Admin:"):
                    break
            text = "".join(printed)
            assert (
                f"http://127.0.0.1:{port}/s/demo/" in text
                and f"http://127.0.0.1:{port}/s/feelings-demo/" in text
            )
            with pytest.raises(urllib.error.HTTPError):
                urllib.request.urlopen(f"http://127.0.0.1:{port}/no-such-page/", timeout=5)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
    lines = [line for line in log.read_text().splitlines() if "no-such-page" in line]
    assert len(lines) == 2, lines  # the access line and Django's "Not Found" warning, once each
    assert all(json.loads(line)["request_id"] for line in lines)
