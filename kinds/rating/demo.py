"""The rating kind's demos (`manage.py seed_demo`, `make run`): the live study `demo` (`StudyKind.demo`: the
demo's 64 prompts, studies/demo/prompts.csv, conditions human / chatgpt / chatgpt_empathy, with consent,
instructions and 3 worked examples, the TEQ, one attention check) and the closed study `published-sample`
(`StudyKind.demo_closed`: the published ratings of 30 of the seed study's batches, for the analysis page)."""

from pathlib import Path

from studies.authenticity_models import NEW_STUDY_TRAPS
from studies.demo.seed import demo_ensure
from studies.demo.texts import DEMO_CORPUS, EMPATHY_SIDES, TAKING_PART
from studies.importers import corpus_import
from studies.models import AttentionCheck, Study

from .importer import ratings_import
from .models import RatingSettings

DEMO_SLUG = "demo"
PUBLISHED_SLUG = "published-sample"
# The published ratings of 30 of the seed study's batches (studies/demo/SOURCE.md).
PUBLISHED_RATINGS = Path(__file__).resolve().parent / "published_ratings.csv"

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

# The demo's own settings (RatingSettings).
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


def rating_demo_ensure() -> Study:
    """The live study `demo`, created if missing (left as it is otherwise)."""
    return demo_ensure(DEMO_SLUG, _rating_demo_create)


def _rating_demo_create() -> Study:
    study = corpus_import(study_slug=DEMO_SLUG, data=DEMO_CORPUS.read_bytes()).study
    for field, value in DEMO_SETTINGS.items():
        setattr(study, field, value)
    study.save()
    RatingSettings.objects.update_or_create(study=study, defaults=DEMO_KIND_SETTINGS)
    AttentionCheck.objects.create(study=study, **ATTENTION_CHECK)
    return study


def published_demo_ensure() -> Study:
    """The published ratings of 30 of the seed study's batches, as a closed study the analysis can open."""
    study = Study.objects.filter(slug=PUBLISHED_SLUG).first()
    if study is None:
        study = ratings_import(
            study_slug=PUBLISHED_SLUG,
            data=PUBLISHED_RATINGS.read_bytes(),
            title="Published ratings: a sample of Welivita & Pu (2024)",
        ).study
    return study
