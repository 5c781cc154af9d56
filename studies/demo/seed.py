"""The demo studies and an admin login, for `make run` on a fresh checkout: each kind seeds its own (`StudyKind.demo`,
a live study; `StudyKind.demo_closed`, a closed study with answers for the analysis), asked through the registry."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from studies.kinds import registered_kinds, resolved
from studies.models import Situation, Study, StudySituation
from studies.services import study_launch

# The demo's situations (the questionnaire and chat demos imagine them).
DEMO_SITUATIONS = Path(__file__).resolve().parent / "situations.json"
DEMO_FACTOR_INDEX = 901
ADMIN_USERNAME = "admin"
PASSWORD_FILE_NAME = "demo-admin-password"


@dataclass
class DemoInfo:
    admin_created: bool
    admin_password: str | None
    admin_link: str
    # The live demo studies the kinds seed (`StudyKind.demo`), by kind name, and their participant links.
    kind_studies: dict[str, Study]
    kind_links: dict[str, str]
    # The closed studies with answers (`StudyKind.demo_closed`), by kind name, and their analysis pages.
    closed_studies: dict[str, Study]
    analysis_links: dict[str, str]
    # Each kind's demo staff pages (`StudyKind.demo_staff_pages`): (what it is, its link).
    staff_links: list[tuple[str, str]]


def _password_file() -> Path:
    return Path(settings.VAR_DIR) / PASSWORD_FILE_NAME


def _stored_or_new_password() -> str:
    path = _password_file()
    if path.exists():
        return path.read_text().strip()
    password = secrets.token_urlsafe(12)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Created readable by its owner only; it lives under var/, which git ignores.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password + "\n")
    return password


def _ensure_admin() -> tuple[bool, str | None]:
    User = get_user_model()
    if User.objects.filter(username=ADMIN_USERNAME).exists():
        path = _password_file()
        return False, path.read_text().strip() if path.exists() else None
    password = _stored_or_new_password()
    User.objects.create_superuser(username=ADMIN_USERNAME, email="", password=password)
    return True, password


def demo_ensure(slug: str, create: Callable[[], Study]) -> Study:
    """A kind's live demo study `slug` (`StudyKind.demo`): left as it is when it exists; else made by `create`
    and launched, in one transaction, so a failure leaves no half-seeded study."""
    study = Study.objects.filter(slug=slug).first()
    if study is not None:
        return study
    with transaction.atomic():
        study = create()
        study_launch(study=study)
    return study


def demo_situations_add(study: Study) -> list[Situation]:
    """The demo's own situations, given to `study` (the questionnaire and chat demos imagine them; a kind's
    `demo` calls it inside `demo_ensure`'s transaction). They are kept apart from an imported EmotionBench pool:
    their factors are numbered from DEMO_FACTOR_INDEX, where the pool's (at most a handful per emotion) never
    reach, so neither overwrites the other."""
    situations = []
    for emotion in json.loads(DEMO_SITUATIONS.read_text())["emotions"]:
        for factor_index, factor in enumerate(emotion["factors"], start=DEMO_FACTOR_INDEX):
            for index, text in enumerate(factor["scenarios"], start=1):
                situation, _ = Situation.objects.get_or_create(
                    emotion=emotion["name"],
                    factor_index=factor_index,
                    index=index,
                    defaults={"factor_name": f"Demo: {factor['name']}", "text": text},
                )
                situations.append(situation)
    StudySituation.objects.bulk_create([StudySituation(study=study, situation=s) for s in situations])
    return situations


def _participant_link(base_url: str, study: Study) -> str:
    pid = f"demo-{secrets.token_hex(4)}"
    session = secrets.token_hex(8)
    return f"{base_url}/s/{study.slug}/?PROLIFIC_PID={pid}&STUDY_ID={study.slug}&SESSION_ID={session}"


def demo_seed(*, base_url: str) -> DemoInfo:
    """Create, if missing, each kind's live demo study (`StudyKind.demo`: the rating kind's `demo`, the
    questionnaire kind's `feelings-demo`, the pairwise kind's `pairs-demo`, the chat kind's `chat-demo`), each
    kind's closed demo study (`StudyKind.demo_closed`: the rating kind's `published-sample`, the published ratings
    of 90 raters, for the analysis), and the superuser `admin`.

    Idempotent: an existing demo study or admin user is left exactly as it is. The admin's password is
    generated once and kept in VAR_DIR/demo-admin-password, so every run reports the same one.
    """
    kind_studies = {kind.name: resolved(kind.demo)() for kind in registered_kinds() if kind.demo is not None}
    closed = {
        kind.name: resolved(kind.demo_closed)() for kind in registered_kinds() if kind.demo_closed is not None
    }
    admin_created, password = _ensure_admin()
    return DemoInfo(
        admin_created=admin_created,
        admin_password=password,
        admin_link=f"{base_url}/admin/",
        kind_studies=kind_studies,
        kind_links={name: _participant_link(base_url, each) for name, each in kind_studies.items()},
        closed_studies=closed,
        analysis_links={name: f"{base_url}/analysis/{each.slug}/" for name, each in closed.items()},
        staff_links=[
            (what, base_url + path.format(slug=kind_studies[kind.name].slug))
            for kind in registered_kinds()
            if kind.name in kind_studies
            for what, path in kind.demo_staff_pages
        ],
    )
