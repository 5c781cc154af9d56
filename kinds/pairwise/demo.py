"""The live pairwise demo `pairs-demo`: the demo's 64 prompts (studies/demo/prompts.csv, the published study's
replies) with the human reply against the two LLM conditions' replies, two at a time."""

from __future__ import annotations

from kinds.pairwise.models import PairwiseSettings
from studies.authenticity_models import NEW_STUDY_TRAPS
from studies.demo.seed import demo_ensure
from studies.demo.texts import DEMO_CORPUS, EMPATHY_SIDES, TAKING_PART
from studies.importers import corpus_import
from studies.models import PairAttentionCheck, Study

PAIRWISE_SLUG = "pairs-demo"
PAIRWISE_CORPUS = DEMO_CORPUS

CONSENT = f"""\
This is a demonstration of a research study about empathy in short written conversations.

You will read a person's description of a situation and the first thing they said about it, then two replies \
written by others. You will say which reply is more empathetic. It takes about eight minutes.

{TAKING_PART} Some conversations mention difficult experiences such as loss or fear.

If you agree to take part, choose "I agree" below."""

INSTRUCTIONS = f"""\
{EMPATHY_SIDES}

On each page you will see the emotion the speaker felt, the situation they described and what they said \
(Speaker 1), then two replies, A and B. Choose the reply that is more empathetic, or "About the same" when \
neither is. If both replies miss or dismiss the speaker's feelings, also tick "Both replies are inadequate".

On a computer you can answer with the keys 1 (A), 2 (B) and 3 (about the same)."""

WORKED_EXAMPLES = [
    {
        "emotion": "lonely",
        "situation": "I moved to a new city for work and I do not know anyone here yet.",
        "speaker_utterance": "Most evenings I just sit in my flat and do not talk to anybody.",
        "reply_a": "That sounds really isolating, especially after such a big move. Have you found anything you "
        "enjoy doing there yet?",
        "reply_b": "You should have thought about that before you moved.",
        "choice": "A",
        "explanation": "A recognises the feeling and invites the speaker to say more; B blames them.",
    },
]

SETTINGS = {
    **NEW_STUDY_TRAPS,
    "kind": Study.Kind.PAIRWISE,
    "title": "Demo: which reply is more empathetic?",
    "description": "Seeded by `manage.py seed_demo`: human against two LLM conditions on 64 published prompts.",
    "consent_text": CONSENT,
    "instructions_text": INSTRUCTIONS,
    "worked_examples": WORKED_EXAMPLES,
    "items_per_participant": 10,
    "quota_per_condition": 60,
    "attention_check_max_failures": 0,
    "seed": 2024,
    "platform": Study.Platform.PROLIFIC,
    "completion_code": "PAIRS-COMPLETE",
    "screened_out_code": "PAIRS-NOCONSENT",
    "failed_checks_code": "PAIRS-CHECKS",
    "completion_redirect_url": "",
    "time_limit_minutes": 30,
}

# A known-answer pair: an ordinary conversation, one warm reply and one that dismisses the speaker.
KNOWN_ANSWER = {
    "emotion_label": "anxious",
    "situation": "I have a job interview tomorrow morning for a position I really want.",
    "speaker_utterance": "I keep going over my answers and I cannot sleep.",
    "good_reply": "It makes sense that you are nervous when it matters this much to you. You have prepared well; "
    "maybe a short walk or some music could help you wind down tonight?",
    "poor_reply": "Whatever. Interviews are boring.",
    "after_item": 5,
}


def pairwise_demo_ensure() -> Study:
    """The live study `pairs-demo`, created if missing (left as it is otherwise)."""
    return demo_ensure(PAIRWISE_SLUG, _pairwise_demo_create)


def _pairwise_demo_create() -> Study:
    Study.objects.create(slug=PAIRWISE_SLUG, **SETTINGS)
    study = corpus_import(study_slug=PAIRWISE_SLUG, data=PAIRWISE_CORPUS.read_bytes()).study
    PairwiseSettings.objects.create(study=study)
    PairAttentionCheck.objects.create(study=study, **KNOWN_ANSWER)
    return study
