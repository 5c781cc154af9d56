import pytest

from recruiting.models import ProlificStudy
from studies.models import Participant
from studies.participants import participant_enroll
from tests.factories import rating_study_build
from tests.loopback_server import LoopbackServer

from .loopback import LoopbackProlific

TOKEN_ENV = "PROLIFIC_TEST_TOKEN"
SECRET_ENV = "PROLIFIC_TEST_WEBHOOK_SECRET"
SECRET = "whsec-test-0123456789"


@pytest.fixture(autouse=True)
def _no_rate_limits(settings):
    settings.RATELIMIT_ENABLED = False


@pytest.fixture(autouse=True)
def _tasks_in_process():
    """Tasks run in this process when the test runs the callbacks the view registered on commit (the real
    worker and broker are exercised by bench/prolific.py); nothing is left on the suite's Redis."""
    from config.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture
def prolific(settings, monkeypatch):
    """A loopback Prolific on its own port, with the client pointed at it and no real waiting on retries."""
    server = LoopbackServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    fake = LoopbackProlific(server)
    settings.PROLIFIC_API_URL = fake.base_url
    settings.PROLIFIC_BACKOFF_BASE = 0.01
    settings.PROLIFIC_BACKOFF_CAP = 0.05
    settings.PROLIFIC_MAX_ATTEMPTS = 4
    monkeypatch.setenv(TOKEN_ENV, "test-token-abc")
    monkeypatch.setenv(SECRET_ENV, SECRET)
    yield fake
    server.clear()
    if server.is_running():
        server.stop()


def link_build(*, conditions=2, quota=5, created=True, fake=None, **fields):
    """A live rating study linked to Prolific; `created` gives it a Prolific study on the loopback server."""
    study = rating_study_build(
        conditions=conditions, prompts=12, items_per_participant=3, quota_per_condition=quota
    )
    link = ProlificStudy.objects.create(
        study=study,
        token_env=TOKEN_ENV,
        webhook_secret_env=SECRET_ENV,
        site_url="https://studies.example.org",
        prolific_name="Rate short conversations",
        prolific_description="Read short conversations and rate how empathetic each reply is.",
        reward=150,
        estimated_minutes=10,
        **fields,
    )
    if created:
        from recruiting.launch import prolific_study_create

        prolific_study_create(link=link)
    return link


def enroll(link, pid: str, fake=None, status="ACTIVE") -> tuple[Participant, dict | None]:
    """A participant arriving from Prolific: a submission there, enrolled here with its SESSION_ID."""
    sub = fake.add_submission(link.prolific_study_id, pid, status) if fake else None
    participant = participant_enroll(
        study=link.study,
        external_id=pid,
        platform="prolific",
        platform_study_id=link.prolific_study_id,
        platform_session_id=sub["id"] if sub else "",
    )
    return participant, sub


def finish(participant: Participant, *, fail_checks: bool = False) -> Participant:
    """Takes an enrolled participant through consent, instructions and every item, as the pages would."""
    from kinds.rating.services import rating_submit
    from studies.models import Assignment
    from studies.participants import participant_advance

    for step in (Participant.Step.CONSENT, Participant.Step.INSTRUCTIONS):
        participant.refresh_from_db()
        if participant.step == step:
            assert participant_advance(participant=participant, from_step=step)
    for assignment in Assignment.objects.filter(participant=participant).order_by("position"):
        value = 2
        if assignment.kind == Assignment.Kind.ATTENTION:
            expected = assignment.attention_check.expected_value
            value = (expected % 3) + 1 if fail_checks else expected
        participant.refresh_from_db()
        rating_submit(participant=participant, position=assignment.position, value=value)
    participant.refresh_from_db()
    assert participant.status == Participant.Status.COMPLETED, participant.status
    return participant
