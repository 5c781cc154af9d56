"""The live demo study `demo`, a sample of published ratings to analyse, and an admin login, for `make run`
on a fresh checkout."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from studies.authenticity_models import NEW_STUDY_TRAPS
from studies.emotionbench.instruments import instruments_import
from studies.importers import corpus_import
from studies.kinds import kind_of, registered_kinds, resolved
from studies.models import (
    AttentionCheck,
    Condition,
    Instrument,
    QuestionnaireSettings,
    Situation,
    Study,
    StudySituation,
)
from studies.services import study_launch

from .texts import DEMO_CORPUS, EMPATHY_SIDES, TAKING_PART

DEMO_SLUG = "demo"
QUESTIONNAIRE_SLUG = "feelings-demo"
QUESTIONNAIRE_INSTRUMENT = Path(__file__).resolve().parent / "panas.json"
QUESTIONNAIRE_SITUATIONS = Path(__file__).resolve().parent / "situations.json"
DEMO_FACTOR_INDEX = 901
ADMIN_USERNAME = "admin"
PASSWORD_FILE_NAME = "demo-admin-password"

CONSENT = f"""\
This is a demonstration of a research study about empathy in short written conversations.

You will read a person's description of a situation, the first thing they said about it, and a reply \
written by someone else. You will say how empathetic that reply is. It takes about ten minutes.

{TAKING_PART} Some conversations mention difficult experiences such as loss or fear.

If you agree to take part, choose "I agree" below."""

INSTRUCTIONS = f"""\
{EMPATHY_SIDES}

On each page you will see the emotion the speaker felt, the situation they described, what they said \
(Speaker 1), and a reply (Speaker 2). Ask yourself: compared with how you would have replied, how \
empathetic is Speaker 2's reply? Choose Good if it is as empathetic as yours or more, Okay if it is \
somewhat empathetic, Bad if it misses or dismisses the speaker's feelings.

There are no right or wrong answers, except on a few pages that tell you exactly what to choose: those check \
that everyone reads carefully."""

WORKED_EXAMPLES = [
    {
        "emotion": "disappointed",
        "situation": "My band practised for months for a local competition and we did not even reach the final.",
        "speaker_utterance": "We worked so hard and still got knocked out in the first round.",
        "response": "That must sting after months of effort. It sounds like you really cared about this. "
        "How is the rest of the band taking it?",
        "rating": 3,
        "explanation": "Good: it names the feeling, recognises the effort, and invites the speaker to say more.",
    },
    {
        "emotion": "proud",
        "situation": "My daughter learned to ride her bike without training wheels this weekend.",
        "speaker_utterance": "She rode all the way down the street on her own!",
        "response": "Nice. Kids learn that at about that age.",
        "rating": 2,
        "explanation": "Okay: friendly enough, but it treats the moment as ordinary instead of sharing the pride.",
    },
    {
        "emotion": "lonely",
        "situation": "I moved to a new city for work and I do not know anyone here yet.",
        "speaker_utterance": "Most evenings I just sit in my flat and do not talk to anybody.",
        "response": "You should have thought about that before you moved.",
        "rating": 1,
        "explanation": "Bad: it blames the speaker and ignores how they feel.",
    },
]

# The demo's settings of its kind (the rating kind's, kinds/rating/models.py).
DEMO_KIND_SETTINGS = {"ask_teq": True, "target_ratings_per_response": 3}
DEMO_SETTINGS = {
    **NEW_STUDY_TRAPS,
    "title": "Demo: how empathetic are these replies?",
    "description": "Seeded by `manage.py seed_demo` from a 64-prompt sample of the public Welivita & Pu data.",
    "consent_text": CONSENT,
    "instructions_text": INSTRUCTIONS,
    "worked_examples": WORKED_EXAMPLES,
    "items_per_participant": 10,
    "quota_per_condition": 50,
    "attention_check_max_failures": 0,
    "seed": 2024,
    "platform": Study.Platform.PROLIFIC,
    "completion_code": "DEMO-COMPLETE",
    "screened_out_code": "DEMO-NOCONSENT",
    "failed_checks_code": "DEMO-CHECKS",
    "completion_redirect_url": "",  # blank: the completion page just shows the code
    "time_limit_minutes": 30,
}

# Looks like any other page (a real emotion, an ordinary situation) until its reply says what to choose, so
# only a reader, not a bot skimming for an "attention check" label, passes it.
ATTENTION_CHECK = {
    "emotion_label": "anticipating",
    "situation": "My sister is flying home next week after two years abroad.",
    "speaker_utterance": "I keep counting the days until she lands.",
    "response_text": "To show that you are reading carefully, please choose Okay on this page.",
    "expected_value": 2,
    "after_item": 2,  # each participant meets it after 2 to 8 of their 10 items, from their seed
    "after_item_max": 8,
}


QUESTIONNAIRE_CONSENT = f"""\
This is a demonstration of a research study about how situations make people feel.

You will say how you feel right now, read a short situation and imagine it happens to you, then say how you \
feel again. It takes about five minutes.

{TAKING_PART} Some situations describe unpleasant events such as unfair treatment or worrying news.

If you agree to take part, choose "I agree" below."""

QUESTIONNAIRE_SETTINGS = {
    **NEW_STUDY_TRAPS,  # the hidden instruction, and two PANAS items asked again on the first page
    "title": "Demo: how do situations make you feel?",
    "description": "Seeded by `manage.py seed_demo`: PANAS before and after imagining one of five situations.",
    "kind": Study.Kind.QUESTIONNAIRE,
    "consent_text": QUESTIONNAIRE_CONSENT,
    "quota_per_condition": 50,
    "seed": 2024,
    "platform": Study.Platform.PROLIFIC,
    "completion_code": "FEEL-COMPLETE",
    "screened_out_code": "FEEL-NOCONSENT",
    "failed_checks_code": "FEEL-CHECKS",
    "completion_redirect_url": "",
    "time_limit_minutes": 30,
}


@dataclass
class DemoInfo:
    study: Study
    study_created: bool
    admin_created: bool
    admin_password: str | None
    participant_link: str
    admin_link: str
    published: Study
    analysis_link: str
    questionnaire: Study
    questionnaire_link: str
    # The demo studies the kinds seed themselves (`StudyKind.demo`), by kind name, and their participant links.
    kind_studies: dict[str, Study]
    kind_links: dict[str, str]


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


def _ensure_study() -> tuple[Study, bool]:
    study = Study.objects.filter(slug=DEMO_SLUG).first()
    if study is not None:
        return study, False
    with transaction.atomic():
        result = corpus_import(study_slug=DEMO_SLUG, data=DEMO_CORPUS.read_bytes())
        study = result.study
        for field, value in DEMO_SETTINGS.items():
            setattr(study, field, value)
        study.save()
        own = kind_of(study).settings(study)
        for field, value in DEMO_KIND_SETTINGS.items():
            setattr(own, field, value)
        own.save()
        AttentionCheck.objects.create(study=study, **ATTENTION_CHECK)
        study_launch(study=study)
    return study, True


def _ensure_questionnaire() -> Study:
    """The live questionnaire study: PANAS, the demo's situations, one human condition."""
    study = Study.objects.filter(slug=QUESTIONNAIRE_SLUG).first()
    if study is not None:
        return study
    with transaction.atomic():
        if not Instrument.objects.filter(name="PANAS").exists():  # an imported EmotionBench PANAS is kept
            instruments_import(path=QUESTIONNAIRE_INSTRUMENT)
        study = Study.objects.create(slug=QUESTIONNAIRE_SLUG, **QUESTIONNAIRE_SETTINGS)
        QuestionnaireSettings.objects.create(study=study, instrument=Instrument.objects.get(name="PANAS"))
        Condition.objects.create(study=study, name="human", kind=Condition.Kind.HUMAN, is_baseline=True)
        StudySituation.objects.bulk_create(
            [StudySituation(study=study, situation=s) for s in _demo_situations()]
        )
        study_launch(study=study)
    return study


def _demo_situations() -> list[Situation]:
    """The demo's own situations, kept apart from an imported EmotionBench pool: their factors are numbered
    from DEMO_FACTOR_INDEX, where the pool's (at most a handful per emotion) never reach, so neither
    overwrites the other."""
    situations = []
    for emotion in json.loads(QUESTIONNAIRE_SITUATIONS.read_text())["emotions"]:
        for factor_index, factor in enumerate(emotion["factors"], start=DEMO_FACTOR_INDEX):
            for index, text in enumerate(factor["scenarios"], start=1):
                situation, _ = Situation.objects.get_or_create(
                    emotion=emotion["name"],
                    factor_index=factor_index,
                    index=index,
                    defaults={"factor_name": f"Demo: {factor['name']}", "text": text},
                )
                situations.append(situation)
    return situations


def _participant_link(base_url: str, study: Study) -> str:
    pid = f"demo-{secrets.token_hex(4)}"
    session = secrets.token_hex(8)
    return f"{base_url}/s/{study.slug}/?PROLIFIC_PID={pid}&STUDY_ID={study.slug}&SESSION_ID={session}"


def demo_seed(*, base_url: str) -> DemoInfo:
    """Create, if missing, the live `demo` study (64 prompts, conditions human / chatgpt / chatgpt_empathy,
    consent, instructions with 3 worked examples, the TEQ, one attention check), the closed study
    `published-sample` (`StudyKind.demo_closed`, kinds/rating/demo.py: the published ratings of 30 of the seed study's batches of 10: 90 raters, 900
    ratings, for the analysis dashboard), the live questionnaire study `feelings-demo` (PANAS before and
    after one of five situations, with consent text), each kind's own demo (`StudyKind.demo`: the pairwise kind's `pairs-demo`)
    and the superuser `admin`.

    Idempotent: an existing demo study or admin user is left exactly as it is. The admin's password is
    generated once and kept in VAR_DIR/demo-admin-password, so every run reports the same one.
    """
    study, study_created = _ensure_study()
    published = next(
        resolved(kind.demo_closed)() for kind in registered_kinds() if kind.demo_closed is not None
    )
    questionnaire = _ensure_questionnaire()
    kind_studies = {kind.name: resolved(kind.demo)() for kind in registered_kinds() if kind.demo is not None}
    admin_created, password = _ensure_admin()
    return DemoInfo(
        study=study,
        study_created=study_created,
        admin_created=admin_created,
        admin_password=password,
        participant_link=_participant_link(base_url, study),
        admin_link=f"{base_url}/admin/",
        published=published,
        analysis_link=f"{base_url}/analysis/{published.slug}/",
        questionnaire=questionnaire,
        questionnaire_link=_participant_link(base_url, questionnaire),
        kind_studies=kind_studies,
        kind_links={name: _participant_link(base_url, each) for name, each in kind_studies.items()},
    )
