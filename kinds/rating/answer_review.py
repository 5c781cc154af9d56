"""The rating kind's answers for the authenticity score (studies/authenticity_reasons.py `answers_summary`): each
answered response's words and server time, and the participant's value beside the study's LLM judges' value.

Named by the rating kind's `answer_review` capability (kinds/rating/kind.py) and read once, when the
participant finishes (studies/authenticity_answers.py).
"""

from __future__ import annotations

from collections import defaultdict

from generation.judge_models import JudgeRating
from generation.selectors import words_count
from studies.models import Assignment, Participant


def rating_answer_review(participant: Participant) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(timed, judged): (words of the situation, utterance and reply, ms from shown to answered) per answered
    response page; (the participant's value, the judges' median value rounded) per response a judge rated."""
    pages = list(
        Assignment.objects.filter(
            participant=participant, kind=Assignment.Kind.RESPONSE, rating__isnull=False
        ).values_list(
            "response_id",
            "shown_at",
            "answered_at",
            "rating__value",
            "response__text",
            "response__prompt__situation",
            "response__prompt__speaker_utterance",
        )
    )
    timed = [
        (words_count(f"{situation} {utterance} {text}"), int((answered - shown).total_seconds() * 1000))
        for _, shown, answered, _, text, situation, utterance in pages
        if shown is not None and answered is not None
    ]
    judges: dict[int, list[int]] = defaultdict(list)
    for response_id, value in JudgeRating.objects.filter(
        response_id__in=[page[0] for page in pages],
        judge__study_id=participant.study_id,
        status=JudgeRating.Status.DONE,
        versus__isnull=True,
        value__isnull=False,
    ).values_list("response_id", "value"):
        judges[response_id].append(value)
    judged = [
        (value, sorted(judges[response_id])[len(judges[response_id]) // 2])
        for response_id, _, _, value, *_ in pages
        if judges.get(response_id)
    ]
    return timed, judged
