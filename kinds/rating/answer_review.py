"""The rating kind's answers for the authenticity score (studies/authenticity_reasons.py `answers_summary`): each
answered response's words and server time, and the participant's value beside the study's LLM judges' value.

Named by the rating kind's `answer_review` capability (kinds/rating/kind.py) and read once, when the
participant finishes (studies/authenticity_answers.py), inside their last answer's transaction: one hand-written
query (studies.rows), the pages with their texts and ratings and, joined to them, the judges' values, where the
ORM's two querysets cost more CPU to compile than the last answer's own statements
(`bench/request_costs.py --profile "answer, in place"`).
"""

from __future__ import annotations

from functools import cache

from django.db import connection

from generation.judge_models import Judge, JudgeRating
from generation.selectors import words_count
from studies import rows
from studies.models import Assignment, AttentionCheck, Participant

from .models import Rating
from .selectors import item_texts_sql


def rating_answer_review(participant: Participant) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(timed, judged): (words of the situation, utterance and reply, ms from shown to answered) per answered
    response page; (the participant's value, the judges' median value rounded) per response a judge rated."""
    params = [
        JudgeRating.Status.DONE.value,
        participant.study_id,
        participant.pk,
        Assignment.Kind.RESPONSE.value,
    ]
    pages: dict[int, tuple] = {}  # assignment id -> (assignment, value, words); in position order
    judges: dict[int, list[int]] = {}  # assignment id -> the judges' values of its response
    for row in rows.fetchall(_review_sql(connection.vendor), params):
        assignment, end = rows.instance(Assignment, row)
        value, _emotion, situation, utterance, text, judge_value = row[end:]
        if assignment.pk not in pages:
            pages[assignment.pk] = (assignment, value, words_count(f"{situation} {utterance} {text}"))
            judges[assignment.pk] = []
        if judge_value is not None:
            judges[assignment.pk].append(judge_value)
    timed = [
        (words, int((a.answered_at - a.shown_at).total_seconds() * 1000))
        for a, _, words in pages.values()
        if a.shown_at is not None and a.answered_at is not None
    ]
    judged = [
        (value, sorted(judges[a.pk])[len(judges[a.pk]) // 2])
        for a, value, _ in pages.values()
        if judges[a.pk]
    ]
    return timed, judged


@cache
def _review_sql(vendor: str) -> str:
    a = lambda name: rows.column(Assignment, name, "a")  # noqa: E731
    j = lambda name: rows.column(JudgeRating, name, "jr")  # noqa: E731
    texts, joins = item_texts_sql(vendor)
    return (
        f"SELECT {rows.columns(Assignment, 'a')}, {rows.column(Rating, 'value', 'rt')}, {texts}, {j('value')}"
        f" FROM {rows.table(Assignment)} a"
        f" JOIN {rows.table(Rating)} rt ON {rows.column(Rating, 'assignment', 'rt')} = {a('id')}"
        f" LEFT JOIN {rows.table(AttentionCheck)} c ON {rows.column(AttentionCheck, 'id', 'c')} = {a('attention_check')}"
        f"{joins}"
        f" LEFT JOIN {rows.table(JudgeRating)} jr ON {j('response')} = {a('response')} AND {j('status')} = %s"
        f" AND {j('versus')} IS NULL AND {j('value')} IS NOT NULL AND {j('judge')} IN"
        f" (SELECT {rows.column(Judge, 'id', 'jd')} FROM {rows.table(Judge)} jd WHERE {rows.column(Judge, 'study', 'jd')} = %s)"
        f" WHERE {a('participant')} = %s AND {a('kind')} = %s"
        f" ORDER BY {a('position')}, {j('id')}"
    )
