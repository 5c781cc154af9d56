"""Permission-checked reads for participant pages: a participant only ever reaches their own rows.

Both run on every participant request, so they are hand-written SQL read into model instances
(`studies.rows`: the ORM's per-call query compile cost more than the queries here)."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from functools import cache

from django.db import connection

from studies import rows
from studies.kinds import kind_of
from studies.models import Assignment, AttentionCheck, Emotion, Participant, Prompt, Response, Study

from . import tickets


def participant_id_for_request(request, slug: str) -> int | None:
    """Which participant of the study `slug` this browser is, or None: the one its ticket names (a signed
    cookie, ratings/tickets.py), else the one its session names (a browser that enrolled before tickets, or
    whose ticket was lost)."""
    participant_id = tickets.participant_id(request, slug=slug)
    return participant_id if participant_id is not None else request.session.get(session_key(slug))


def participant_get_for_request(request, slug: str) -> Participant | None:
    """The participant of the study `slug` this browser is (`participant_id_for_request`), with their study
    (one query), or None."""
    participant_id = participant_id_for_request(request, slug)
    return None if participant_id is None else participant_get(participant_id=participant_id, slug=slug)


def participant_get(*, participant_id: int, slug: str) -> Participant | None:
    """Participant `participant_id` of the study `slug`, with their study (one query), or None. For an id
    the request's ticket (ratings/tickets.py) or its session named."""
    row = rows.fetchone(participant_for_session_sql(connection.vendor), [participant_id, slug])
    if row is None:
        return None
    participant, end = rows.instance(Participant, row)
    participant.study, _ = rows.instance(Study, row, end)
    return participant


@cache
def participant_for_session_sql(vendor: str) -> str:
    """The participant (id, first parameter) with their study (its slug, second), their columns then its
    (`rows.instance` of each)."""
    return (
        f"SELECT {rows.columns(Participant, 'p')}, {rows.columns(Study, 's')}"
        f" FROM {rows.table(Participant)} p JOIN {rows.table(Study)} s"
        f" ON {rows.column(Study, 'id', 's')} = {rows.column(Participant, 'study', 'p')}"
        f" WHERE {rows.column(Participant, 'id', 'p')} = %s AND {rows.column(Study, 'slug', 's')} = %s"
    )


def study_get_by_slug(slug: str) -> Study | None:
    """The study `slug` names, or None (the entry's look-up: one hand-written query)."""
    row = rows.fetchone(_study_sql(connection.vendor), [slug])
    return None if row is None else rows.instance(Study, row)[0]


@cache
def _study_sql(vendor: str) -> str:
    return f"SELECT {rows.columns(Study, 's')} FROM {rows.table(Study)} s WHERE {rows.column(Study, 'slug', 's')} = %s"


def session_key(slug: str) -> str:
    return f"ratings:participant:{slug}"


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
        """The picture check: shown only on its full page (ratings/picture.py draws it), never in place."""
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


def worked_examples(study: Study) -> list[dict]:
    """The study's worked examples as the instructions page shows them, in its kind's form
    (`StudyKind.worked_example_form`): `texts`, (key, label, text) of each text given, in order; `answer_title`
    and `answer`, the label of its answer; `explanation`."""
    kind = kind_of(study)
    form = kind.worked_example_form
    labels = {str(value): label for value, label in kind.example_answers(study)}
    shown = []
    for example in study.worked_examples or []:
        if not isinstance(example, dict):
            continue
        answer = example.get(form.answer_key)
        shown.append(
            {
                "texts": [(key, label, example[key]) for key, label in form.texts if example.get(key)],
                "answer_title": form.answer_label,
                "answer": labels.get(str(answer), "" if answer is None else str(answer)),
                "explanation": example.get("explanation", ""),
            }
        )
    return shown
