"""The rating kind's reads for its item pages: the participant's current item and what it shows (hand-written SQL,
studies/rows.py: it runs on every item page), as the page and an answer's reply in place show it."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from functools import cache

from django.db import connection

from studies import rows
from studies.models import Assignment, AttentionCheck, Emotion, Participant, Prompt, Response, Study


@dataclass(frozen=True)
class CurrentItem:
    """The page of the participant's current item: the assignment and what it shows."""

    assignment: Assignment
    number: int  # 1-based, for "item 3 of 10"
    total: int
    emotion: str
    situation: str
    utterance: str
    response: str

    @property
    def answered(self) -> int:
        return self.number - 1

    @property
    def is_picture(self) -> bool:
        """The picture check: shown only on its full page (studies/authenticity_picture.py draws it), never in place."""
        return self.assignment.kind == Assignment.Kind.PICTURE


def assignment_current_for_participant(*, participant: Participant) -> CurrentItem | None:
    """The participant's first unanswered assignment (with what the page shows, and where it stands among
    their items), or None when all are done. One query."""
    row = rows.fetchone(_current_sql(connection.vendor), [participant.pk])
    if row is None:
        return None
    assignment, end = rows.instance(Assignment, row)
    emotion, situation, utterance, response, total, answered = row[end:]
    return CurrentItem(
        assignment=assignment,
        number=answered + 1,
        total=total,
        emotion=emotion or "",
        situation=situation or "",
        utterance=utterance or "",
        response=response or "",
    )


@cache
def item_texts_sql(vendor: str) -> tuple[str, str]:
    """What an item page shows (emotion, situation, utterance, response), as four SELECT columns, and the
    joins they need, for an assignment aliased `a` whose attention check (if any) is joined as `c`: an
    attention check shows its own texts, a response those of its prompt."""
    a = lambda name: rows.column(Assignment, name, "a")  # noqa: E731
    shown = [
        (rows.column(Emotion, "name", "e"), rows.column(AttentionCheck, "emotion_label", "c")),
        (rows.column(Prompt, "situation", "p"), rows.column(AttentionCheck, "situation", "c")),
        (
            rows.column(Prompt, "speaker_utterance", "p"),
            rows.column(AttentionCheck, "speaker_utterance", "c"),
        ),
        (rows.column(Response, "text", "r"), rows.column(AttentionCheck, "response_text", "c")),
    ]
    attention = Assignment.Kind.ATTENTION.value
    columns = ", ".join(
        f"CASE WHEN {a('kind')} = '{attention}' THEN {check} ELSE {page} END" for page, check in shown
    )
    joins = (
        f" LEFT JOIN {rows.table(Response)} r ON {rows.column(Response, 'id', 'r')} = {a('response')}"
        f" LEFT JOIN {rows.table(Prompt)} p ON {rows.column(Prompt, 'id', 'p')} = {rows.column(Response, 'prompt', 'r')}"
        f" LEFT JOIN {rows.table(Emotion)} e ON {rows.column(Emotion, 'id', 'e')} = {rows.column(Prompt, 'emotion', 'p')}"
    )
    return columns, joins


@cache
def _current_sql(vendor: str) -> str:
    a = lambda name: rows.column(Assignment, name, "a")  # noqa: E731
    x = lambda name: rows.column(Assignment, name, "x")  # noqa: E731
    texts, joins = item_texts_sql(vendor)
    mine = f"FROM {rows.table(Assignment)} x WHERE {x('participant')} = {a('participant')}"
    return (
        f"SELECT {rows.columns(Assignment, 'a')}, {texts},"
        f" (SELECT COUNT(*) {mine}),"
        f" (SELECT COUNT(*) {mine} AND {x('answered_at')} IS NOT NULL)"
        f" FROM {rows.table(Assignment)} a{joins}"
        f" LEFT JOIN {rows.table(AttentionCheck)} c ON {rows.column(AttentionCheck, 'id', 'c')} = {a('attention_check')}"
        f" WHERE {a('participant')} = %s AND {a('answered_at')} IS NULL"
        f" ORDER BY {a('position')} LIMIT 1"
    )


def item_payload(item: CurrentItem, *, title: str) -> dict:
    """What the item page needs to show `item` in place (`{"item": ...}` of an answer's reply); `title` is the
    study's."""
    return {
        "position": item.assignment.position,
        "number": item.number,
        "total": item.total,
        "answered": item.answered,
        "emotion": item.emotion,
        "situation": item.situation,
        "utterance": item.utterance,
        "response": item.response,
        "title": f"Item {item.number} of {item.total}: {title}",
    }


def item_disguise_attention_check(*, item: CurrentItem, participant: Participant) -> CurrentItem:
    """The attention-check page shows a real emotion of the study, as every other page does, so a bot
    or an LLM agent cannot spot it by an "attention check" label. A check whose label already is one of
    the study's emotions keeps it; otherwise the label is drawn from the study's emotions, the same one
    on every showing to this participant. Only what is shown changes: the expected answer does not."""
    if item.assignment.kind != Assignment.Kind.ATTENTION:
        return item
    names = sorted(
        set(Emotion.objects.filter(prompts__study_id=participant.study_id).values_list("name", flat=True))
    )
    if not names or item.emotion.strip().lower() in {name.lower() for name in names}:
        return item
    chosen = random.Random(f"{participant.pk}:{item.assignment.pk}").choice(names)
    return replace(item, emotion=chosen)


def scale_buttons(study: Study) -> list[tuple[int, dict]]:
    """The item page's answer buttons: each scale option with its keyboard shortcut (1, 2, 3, ...). The full
    item page and its shell (`shared_pages.item_in_place`) show the same ones."""
    return [(index + 1, option) for index, option in enumerate(study.scale)]
