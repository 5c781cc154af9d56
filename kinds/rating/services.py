"""What a participant's answers do: consent, the TEQ, ratings, and finishing.

The participant's lifecycle (its row lock, `participant_advance`, completing, screening out) is
studies/participants.py; these services store the rating kind's answers with the participant's row locked
there, and move the step in the same transaction, so two tabs, a double click or a replayed form can never
move a participant twice or store an answer twice. The OneToOne key of Rating → Assignment is the last line
of defence: the database refuses a second rating.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from kinds.rating.models import Rating
from studies import authenticity, rows
from studies.answers import (  # noqa: F401 (the answers' refusals, raised and imported from here too)
    AnswerRejected,
    InvalidValue,
    NotCurrentItem,
    NotYourItem,
    Page,
    ParticipantNotActive,
    answer_take,
)
from studies.models import Assignment, AttentionCheck, Participant
from studies.participants import (
    participant_advance,
    participant_lock,
    participant_state_copy,
)

from . import teq
from .selectors import (
    CurrentItem,
    assignment_current_for_participant,
    item_disguise_attention_check,
    item_texts_sql,
)


class InvalidAnswers(AnswerRejected):
    def __init__(self, errors: dict[int, str]):
        self.errors = errors
        super().__init__("; ".join(f"item {n}: {msg}" for n, msg in sorted(errors.items())))


@dataclass(frozen=True)
class RatingSubmitted:
    rating: Rating
    created: bool  # False: this item was already answered and the stored rating is returned unchanged
    completed: bool  # True: the participant is finished (now or before)
    # With `show_next=True` and a new answer that leaves items to do: the participant's next item, already
    # marked as shown (in the answer's own transaction), for the in-place page. None otherwise.
    next_item: CurrentItem | None = None
    # A consistency pair's second answer: whether it lies far from the first (authenticity.pair_far); else None.
    pair_far: bool | None = None
    # The picture check's answer: its outcome (authenticity.picture_outcome); else None.
    picture: str | None = None


@cache
def _layout(vendor: str) -> dict[str, int]:
    """Where the fields the answer needs sit in a row of `_items_sql` (Assignment's columns first)."""
    names = [field.attname for field in Assignment._meta.concrete_fields]
    n = len(names)
    return {
        "id": names.index("id"),
        "position": names.index("position"),
        "kind": names.index("kind"),
        "answered_at": names.index("answered_at"),
        "response": names.index("response_id"),
        "expected": n,
        "rating": n + 1,  # the rating's first column (its id): None when unanswered
        "texts": n + 1 + len(Rating._meta.concrete_fields),
    }


class _Item:
    """One of the participant's items, read from a row of `_items_sql`: the few fields every answer needs
    are read straight from the row; the Assignment and Rating instances are built only when asked for (the
    answered item), not for all ten or so rows of every answer."""

    __slots__ = ("row", "at")

    def __init__(self, row: tuple, at: dict[str, int]) -> None:
        self.row, self.at = row, at

    @property
    def assignment_id(self) -> int:
        return self.row[self.at["id"]]

    @property
    def position(self) -> int:
        return self.row[self.at["position"]]

    @property
    def kind(self) -> str:
        return self.row[self.at["kind"]]

    @property
    def response_id(self) -> int | None:
        return self.row[self.at["response"]]

    @property
    def answered(self) -> bool:
        return self.row[self.at["answered_at"]] is not None

    @property
    def expected_value(self) -> int | None:  # an attention check's expected answer
        return self.row[self.at["expected"]]

    @property
    def assignment(self) -> Assignment:
        return rows.instance(Assignment, self.row)[0]

    @property
    def rating(self) -> Rating | None:  # the stored answer, if any
        if self.row[self.at["rating"]] is None:
            return None
        return rows.instance(Rating, self.row, self.at["rating"])[0]

    def texts(self) -> tuple[str, str, str, str]:
        """Emotion, situation, utterance, response (only with `_items_of(..., texts=True)`)."""
        start = self.at["texts"]
        return tuple(value or "" for value in self.row[start : start + 4])


def _items_of(participant: Participant, *, texts: bool = False) -> list[_Item]:
    """All of the participant's items in position order, each with its attention check's expected value
    and its stored rating (one query: ten or so rows); `texts=True` adds what each page shows."""
    at = _layout(connection.vendor)
    return [_Item(row, at) for row in rows.fetchall(_items_sql(connection.vendor, texts), [participant.pk])]


@cache
def _items_sql(vendor: str, texts: bool) -> str:
    a = lambda name: rows.column(Assignment, name, "a")  # noqa: E731
    shown, joins = item_texts_sql(vendor) if texts else ("", "")
    return (
        f"SELECT {rows.columns(Assignment, 'a')}, {rows.column(AttentionCheck, 'expected_value', 'c')},"
        f" {rows.columns(Rating, 'rt')}{', ' + shown if texts else ''}"
        f" FROM {rows.table(Assignment)} a"
        f" LEFT JOIN {rows.table(AttentionCheck)} c"
        f" ON {rows.column(AttentionCheck, 'id', 'c')} = {a('attention_check')}"
        f" LEFT JOIN {rows.table(Rating)} rt ON {rows.column(Rating, 'assignment', 'rt')} = {a('id')}{joins}"
        f" WHERE {a('participant')} = %s ORDER BY {a('position')}"
    )


def _assignment_times_set(assignment_id: int, *, shown_at: datetime) -> None:
    """Sets shown_at of one assignment where it is not set yet (the first showing counts). Hand-written:
    it runs on every item page."""
    with connection.cursor() as cursor:
        cursor.execute(*_assignment_times(assignment_id, answered_at=None, shown_at=shown_at))


def _assignment_times(
    assignment_id: int, *, answered_at: datetime | None, shown_at: datetime, next_id: int | None = None
) -> tuple[str, list]:
    """The UPDATE (SQL and parameters) setting shown_at (and answered_at, when given) of one assignment;
    shown_at only where it is not set yet (the first showing counts). `next_id`: the answer also marks the
    next item as shown, in the same statement (the in-place page shows it right away)."""
    adapt = connection.ops.adapt_datetimefield_value
    if next_id is not None:
        params = [assignment_id, adapt(answered_at), adapt(shown_at), assignment_id, next_id]
        return _times_next_sql(connection.vendor), params
    answering = answered_at is not None
    params = [adapt(answered_at), adapt(shown_at)] if answering else [adapt(shown_at)]
    return _times_sql(connection.vendor, answering), [*params, assignment_id]


@cache
def _times_sql(vendor: str, answering: bool) -> str:
    quote = connection.ops.quote_name
    shown, answered, pk = (
        quote(Assignment._meta.get_field(f).column) for f in ("shown_at", "answered_at", "id")
    )
    if answering:
        return f"UPDATE {rows.table(Assignment)} SET {answered} = %s, {shown} = COALESCE({shown}, %s) WHERE {pk} = %s"
    return f"UPDATE {rows.table(Assignment)} SET {shown} = %s WHERE {pk} = %s AND {shown} IS NULL"


@cache
def _times_next_sql(vendor: str) -> str:
    quote = connection.ops.quote_name
    shown, answered, pk = (
        quote(Assignment._meta.get_field(f).column) for f in ("shown_at", "answered_at", "id")
    )
    return (
        f"UPDATE {rows.table(Assignment)} SET {answered} = CASE WHEN {pk} = %s THEN %s ELSE {answered} END,"
        f" {shown} = COALESCE({shown}, %s) WHERE {pk} IN (%s, %s)"
    )


def teq_submit(*, participant: Participant, answers: dict[int, str], now: datetime | None = None) -> bool:
    """Stores the 16 TEQ answers ({item number: never|rarely|sometimes|often|always}) and their total on the
    participant, and moves them to the next step. Raises InvalidAnswers (nothing stored) for a missing or
    unknown answer. A second submit after the first moved the participant on is a no-op (False)."""
    now = now or timezone.now()
    valid_codes = {code for code, _label in teq.OPTIONS}
    errors = {n: "please choose an answer" for n in teq.ITEMS if answers.get(n) in (None, "")}
    errors.update({n: "not one of the answers" for n, a in answers.items() if a and a not in valid_codes})
    errors.update({n: "no such item" for n in answers if n not in teq.ITEMS})
    if errors:
        raise InvalidAnswers(errors)
    with transaction.atomic():
        locked = participant_lock(participant)
        if locked.status != Participant.Status.ACTIVE or locked.step != Participant.Step.TEQ:
            return False
        locked.teq_answers = {str(n): answers[n] for n in sorted(teq.ITEMS)}
        locked.teq_score = teq.teq_score(answers)
        locked.save(update_fields=["teq_answers", "teq_score"])
        participant_advance(participant=locked, from_step=Participant.Step.TEQ, now=now)
    participant_state_copy(participant, locked)
    return True


def rating_submit(
    *,
    participant: Participant,
    position: int,
    value: int,
    response_time_ms: int | None = None,
    now: datetime | None = None,
    show_next: bool = False,
) -> RatingSubmitted:
    """Stores the participant's answer to their item at `position`, exactly once.

    * The item is looked up among the participant's own assignments only (NotYourItem otherwise).
    * An item already answered returns the stored rating unchanged (`created=False`): a double click, a
      second tab or a resubmitted page is a no-op, never an error.
    * Only the current item (the first unanswered one) can be answered (NotCurrentItem otherwise), and only
      while the participant is active on the items step (ParticipantNotActive).
    * `value` must be one of the study's scale values (InvalidValue); on the picture check it may also be
      `authenticity.PICTURE_SKIPPED` ("I can't see the picture"). Its outcome is scored after the commit.
    * An attention check compares the value with its expected value; failures beyond
      `study.attention_check_max_failures` flag the participant for exclusion with the reason.
    * The last answer completes the participant with the code their outcome earns.
    * `response_time_ms` defaults to the time since the item was first shown.
    * `show_next=True` (the in-place page): a new answer that leaves items to do also marks the next item
      as shown and returns it (`next_item`), read by the same query and written by the same UPDATE as the
      answer, so showing it costs no extra round trip.

    Locking: the participant's row, for the whole check-then-write, so concurrent submits of one
    participant run one after another; the OneToOne key on Rating backs it up.
    """
    now = now or timezone.now()
    try:
        with transaction.atomic():
            locked = participant_lock(participant)
            submitted = _answer_store(
                locked,
                position=position,
                value=value,
                response_time_ms=response_time_ms,
                now=now,
                show_next=show_next,
            )
    except IntegrityError:
        # The OneToOne key refused a second rating. Cannot happen while the row lock holds (the whole
        # transaction above is rolled back); kept as the constraint's contract.
        stored = Rating.objects.get(assignment__participant=participant, assignment__position=position)
        return RatingSubmitted(rating=stored, created=False, completed=False)
    if submitted.created:
        participant_state_copy(participant, locked)
    if submitted.pair_far is not None:  # after the answer's statements, in the signals' transaction if any
        authenticity.pair_record(participant=participant, position=position, far=submitted.pair_far)
    if submitted.picture is not None:
        authenticity.picture_record(participant=participant, outcome=submitted.picture)
    return submitted


def _answer_store(
    locked: Participant,
    *,
    position: int,
    value: int,
    response_time_ms: int | None,
    now: datetime,
    show_next: bool,
) -> RatingSubmitted:
    """`rating_submit`'s work once the participant's row is locked (`locked`, with its study): the answer
    protocol (studies/answers.py) over the participant's items, with the rating as the kind's answer; run
    inside the transaction holding the lock."""
    mine = _items_of(locked, texts=show_next)
    unanswered = [i for i in mine if not i.answered]
    pages = [
        Page(i.position, Participant.Step.ITEMS, i.answered, i.kind == Assignment.Kind.ATTENTION)
        for i in mine
    ]
    study = locked.study
    stored: dict = {}

    def store(page: Page) -> bool:
        item = unanswered[0]  # the protocol found it current
        picture = item.kind == Assignment.Kind.PICTURE
        if value not in study.scale_values and not (picture and value == authenticity.PICTURE_SKIPPED):
            raise InvalidValue(f"{value!r} is not on this study's scale {study.scale_values}.")
        assignment = item.assignment
        elapsed = response_time_ms
        if elapsed is None and assignment.shown_at is not None:
            elapsed = max(0, int((now - assignment.shown_at).total_seconds() * 1000))
        following = unanswered[1] if show_next and len(unanswered) > 1 else None
        # The rating and the item's times (and the next item's, shown in place) in one round trip.
        times = _assignment_times(
            assignment.pk,
            answered_at=now,
            shown_at=now,
            next_id=following.assignment_id if following else None,
        )
        rating = rows.insert(
            Rating,
            along=times,
            assignment_id=assignment.pk,
            value=value,
            response_time_ms=elapsed,
            created_at=now,
        )
        rating.assignment = assignment
        stored.update(rating=rating, following=following)
        if item.kind == Assignment.Kind.REPEAT:
            first = next(
                (i for i in mine if i.kind == Assignment.Kind.RESPONSE and i.response_id == item.response_id),
                None,
            )
            if first is not None and first.rating is not None:
                stored["pair_far"] = authenticity.pair_far(first.rating.value, value, study.scale_values)
        if picture:
            stored["picture"] = authenticity.picture_outcome(
                study=study,
                participant_id=locked.pk,
                options=study.scale,
                value=value,
                skipped=value == authenticity.PICTURE_SKIPPED,
            )
        return item.kind == Assignment.Kind.ATTENTION and value != item.expected_value

    taken = answer_take(locked, pages=pages, position=position, now=now, store=store)
    if not taken.created:
        item = next(i for i in mine if i.position == position)
        return RatingSubmitted(rating=item.rating, created=False, completed=taken.completed)
    following = stored["following"]
    return RatingSubmitted(
        rating=stored["rating"],
        created=True,
        completed=taken.completed,
        next_item=_shown(following, total=len(mine), answered=len(mine) - len(unanswered) + 1, now=now)
        if following
        else None,
        pair_far=stored.get("pair_far"),
        picture=stored.get("picture"),
    )


def _shown(item: _Item, *, total: int, answered: int, now: datetime) -> CurrentItem:
    """The next item as the item page shows it, just marked as shown at `now`."""
    assignment = item.assignment
    if assignment.shown_at is None:
        assignment.shown_at = now
    emotion, situation, utterance, response = item.texts()
    return CurrentItem(
        assignment=assignment,
        number=answered + 1,
        total=total,
        emotion=emotion,
        situation=situation,
        utterance=utterance,
        response=response,
    )


def assignment_mark_shown(*, assignment: Assignment, now: datetime | None = None) -> None:
    """Records when an item was first shown (later views keep the first time)."""
    now = now or timezone.now()
    if assignment.shown_at is None:
        _assignment_times_set(assignment.pk, shown_at=now)
        assignment.shown_at = now


def item_mark_shown(*, participant: Participant, now: datetime) -> None:
    """The participant's current item marked as shown at `now`, where it was not shown before."""
    current = assignment_current_for_participant(participant=participant)
    if current is not None:
        assignment_mark_shown(assignment=current.assignment, now=now)


def item_show(*, participant: Participant) -> CurrentItem | None:
    """The participant's current item as their page shows it (an attention check disguised), marked as shown:
    its first showing starts the answer's response time. None when every item is answered."""
    current = assignment_current_for_participant(participant=participant)
    if current is None:
        return None
    assignment_mark_shown(assignment=current.assignment)
    return item_disguise_attention_check(item=current, participant=participant)
