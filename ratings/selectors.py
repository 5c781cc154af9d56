"""Permission-checked reads for participant pages: a participant only ever reaches their own rows.

Both run on every participant request, so they are hand-written SQL read into model instances
(`studies.rows`: the ORM's per-call query compile cost more than the queries here)."""

from __future__ import annotations

from functools import cache

from django.db import connection

from studies import rows
from studies.kinds import kind_of
from studies.models import Participant, Study

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
