"""The questionnaire kind's live demo `feelings-demo` (`StudyKind.demo`, `manage.py seed_demo`): PANAS before
and after imagining one of the demo's five situations (studies/demo/situations.json), one human condition."""

from pathlib import Path

from studies.authenticity_models import NEW_STUDY_TRAPS
from studies.demo.seed import demo_ensure, demo_situations_add
from studies.demo.texts import TAKING_PART
from studies.emotionbench.instruments import instruments_import
from studies.models import Condition, Instrument, QuestionnaireSettings, Study

QUESTIONNAIRE_SLUG = "feelings-demo"
INSTRUMENT = Path(__file__).resolve().parent / "panas.json"

CONSENT = f"""\
This is a demonstration of a research study about how situations make people feel.

You will say how you feel right now, read a short situation and imagine it happens to you, then say how you \
feel again. It takes about five minutes.

{TAKING_PART} Some situations describe unpleasant events such as unfair treatment or worrying news.

If you agree to take part, choose "I agree" below."""

SETTINGS = {
    **NEW_STUDY_TRAPS,  # the hidden instruction, and two PANAS items asked again on the first page
    "title": "Demo: how do situations make you feel?",
    "description": "Seeded by `manage.py seed_demo`: PANAS before and after imagining one of five situations.",
    "kind": Study.Kind.QUESTIONNAIRE,
    "consent_text": CONSENT,
    "quota_per_condition": 50,
    "seed": 2024,
    "platform": Study.Platform.PROLIFIC,
    "completion_code": "FEEL-COMPLETE",
    "screened_out_code": "FEEL-NOCONSENT",
    "failed_checks_code": "FEEL-CHECKS",
    "completion_redirect_url": "",
    "time_limit_minutes": 30,
}


def questionnaire_demo_ensure() -> Study:
    """The live questionnaire study `feelings-demo`, created if missing (left as it is otherwise)."""
    return demo_ensure(QUESTIONNAIRE_SLUG, _questionnaire_demo_create)


def _questionnaire_demo_create() -> Study:
    if not Instrument.objects.filter(name="PANAS").exists():  # an imported EmotionBench PANAS is kept
        instruments_import(path=INSTRUMENT)
    study = Study.objects.create(slug=QUESTIONNAIRE_SLUG, **SETTINGS)
    QuestionnaireSettings.objects.create(study=study, instrument=Instrument.objects.get(name="PANAS"))
    Condition.objects.create(study=study, name="human", kind=Condition.Kind.HUMAN, is_baseline=True)
    demo_situations_add(study)
    return study
