"""The pairwise kind's answers for the authenticity score (studies/authenticity_reasons.py `answers_summary`): each
answered pair's words and server time, and the participant's choice beside the study's comparing judges' verdict.

Named by the pairwise kind's `answer_review` capability (kinds/pairwise/kind.py), read once when the
participant finishes (studies/authenticity_answers.py).
"""

from __future__ import annotations

from collections import defaultdict

from generation.judge_formats import VERDICT_A, VERDICT_B, VERDICT_SAME
from generation.judge_models import JudgeRating
from generation.selectors import words_count
from kinds.pairwise.models import PairItem
from studies.models import Participant

# A choice and a verdict in one vocabulary: 1 the left reply, 2 the right one, 3 about the same.
_CHOICE = {"left": 1, "right": 2, "tie": 3, "same": 3}


def judge_verdicts(*, study_id: int, ids: list[int]) -> dict[tuple[int, int], list[int]]:
    """The study's comparing judges' verdicts on pairs of the replies `ids`, by (left, right) in either order, in
    the choices' vocabulary as seen from that order (1 the left reply, 2 the right one, 3 about the same)."""
    verdicts: dict[tuple[int, int], list[int]] = defaultdict(list)
    as_shown = {VERDICT_A: 1, VERDICT_B: 2, VERDICT_SAME: 3}
    flipped = {VERDICT_A: 2, VERDICT_B: 1, VERDICT_SAME: 3}
    for response_id, versus_id, value in JudgeRating.objects.filter(
        judge__study_id=study_id,
        status=JudgeRating.Status.DONE,
        response_id__in=ids,
        versus_id__in=ids,
        value__in=list(as_shown),
    ).values_list("response_id", "versus_id", "value"):
        verdicts[(response_id, versus_id)].append(as_shown[value])
        verdicts[(versus_id, response_id)].append(flipped[value])
    return verdicts


def pairwise_answer_review(participant: Participant) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(timed, judged): (words of the opening and both replies, ms from shown to answered) per answered pair;
    (the participant's choice, the judges' verdict on the same two replies) per pair a judge compared."""
    pairs = list(
        PairItem.objects.filter(
            participant=participant,
            trap="",
            left__isnull=False,
            right__isnull=False,
            answered_at__isnull=False,
        ).values_list(
            "left_id",
            "right_id",
            "shown_at",
            "answered_at",
            "choice",
            "prompt__situation",
            "prompt__speaker_utterance",
            "left__text",
            "right__text",
        )
    )
    timed = [
        (words_count(" ".join(texts)), int((answered - shown).total_seconds() * 1000))
        for _, _, shown, answered, _, *texts in pairs
        if shown is not None
    ]
    verdicts = judge_verdicts(
        study_id=participant.study_id, ids=[pair[0] for pair in pairs] + [pair[1] for pair in pairs]
    )
    judged = []
    for left, right, _, _, choice, *_ in pairs:
        found = verdicts.get((left, right), [])
        if found and choice in _CHOICE:
            judged.append((_CHOICE[choice], sorted(found)[len(found) // 2]))
    return timed, judged
