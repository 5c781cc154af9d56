"""What a participant's answers show, for the authenticity score: read once, when they finish.

The study's kind says how its answers are read (`StudyKind.answer_review`, a dotted path: each answered page's
words and server time, each answer beside the study's LLM judges'); `authenticity_reasons.answers_summary` sums
them up and `authenticity.answers_record` keeps the summary with the participant and rescores them. Server times
only (from when the page was shown to when its answer arrived), so it holds with JavaScript off too.
"""

from __future__ import annotations

from django.utils.module_loading import import_string

from .authenticity import answers_record
from .authenticity_reasons import answers_summary
from .kinds import kind_of
from .models import Participant


def answers_review(participant: Participant) -> None:
    """Reads the finished participant's answers through their kind and stores what they show (nothing for a
    kind that names no `answer_review`, or too few answers to tell)."""
    path = kind_of(participant.study).answer_review
    if path is None:
        return
    timed, judged = import_string(path)(participant)
    answers_record(participant=participant, summary=answers_summary(timed=timed, judged=judged))
