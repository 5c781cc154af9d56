"""The counting rules as SQL (studies/balancing.py, used by enrolment's hand-written queries) count what
their ORM filters count, and the tie-break the database applies is fair and replays from the seed."""

import random
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count
from django.utils import timezone

from studies import rows
from studies.balancing import (
    DEAL_ORDER_SALT,
    condition_counts,
    counted_participants,
    deal_order_sql,
    deal_start,
    live_assignments,
    tie_break_draws,
    tie_break_key,
    tie_break_sql,
)
from studies.kinds.rating import _pages_params, _pages_sql, response_live_counts
from studies.models import Assignment, Participant, Response
from studies.participants import participant_enroll
from tests.factories import rating_study_build

pytestmark = pytest.mark.django_db


def _mixed_study():
    """Participants in every state the counting rules tell apart, with answered and unanswered pages."""
    study = rating_study_build(conditions=2, prompts=8, items_per_participant=3, quota_per_condition=100)
    now = timezone.now()
    people = [participant_enroll(study=study, external_id=f"p{i}") for i in range(12)]
    past_limit = now - timedelta(minutes=study.time_limit_minutes + 1)
    states = [
        {"status": Participant.Status.COMPLETED, "step": "done"},
        {"status": Participant.Status.ACTIVE, "step": "items"},
        {"status": Participant.Status.ACTIVE, "step": "items", "last_seen_at": past_limit},
        {"status": Participant.Status.ACTIVE, "step": "consent", "last_seen_at": now - timedelta(hours=12)},
        {"status": Participant.Status.ACTIVE, "step": "consent"},
        {"status": Participant.Status.RETURNED, "step": "done"},
        {"status": Participant.Status.TIMED_OUT, "step": "items", "last_seen_at": past_limit},
        {"status": Participant.Status.SCREENED_OUT, "step": "done"},
        {"status": Participant.Status.ACTIVE, "step": "items", "is_preview": True},
        {"status": Participant.Status.EXCLUDED, "step": "done"},
        {"status": Participant.Status.ACTIVE, "step": "items", "last_seen_at": now - timedelta(days=3)},
        {"status": Participant.Status.COMPLETED, "step": "done", "is_preview": True},
    ]
    for person, fields in zip(people, states, strict=True):
        Participant.objects.filter(pk=person.pk).update(**fields)
        first = person.assignments.order_by("position").first()
        Assignment.objects.filter(pk=first.pk).update(answered_at=now)
    Response.objects.filter(pk=people[0].assignments.first().response_id).update(
        review=Response.Review.FLAGGED
    )
    return study, now


def test_the_counting_rules_in_sql_count_what_the_orm_filters_count():
    study, now = _mixed_study()
    later = now + timedelta(minutes=20)  # past the consent hold too
    for at in (now, later):
        orm = dict.fromkeys(study.conditions.values_list("id", flat=True), 0)
        for row in (
            Participant.objects.filter(study=study, is_preview=False, condition__isnull=False)
            .filter(counted_participants(study, at))
            .values("condition")
            .annotate(n=Count("id"))
            .order_by()
        ):
            orm[row["condition"]] = row["n"]
        assert condition_counts(study=study, now=at) == orm
        for condition in study.conditions.all():
            eligible = Response.objects.filter(condition=condition, sample_index=0).exclude(review="flagged")
            expected = dict.fromkeys(eligible.values_list("id", flat=True), 0)
            for row in (
                Assignment.objects.filter(participant__condition=condition, kind="response")
                .filter(live_assignments(study, at))
                .values("response")
                .annotate(n=Count("id"))
                .order_by()
            ):
                if row["response"] in expected:
                    expected[row["response"]] = row["n"]
            assert response_live_counts(condition=condition, now=at) == expected


def test_the_deal_takes_a_run_of_the_counts_order_from_a_drawn_start_and_replays_from_the_seed():
    """Among responses with the same count the deal takes the next ones in that count's fixed order (a hash of
    the id and the count), from a point the participant's draws give, wrapping around at the end; the
    starting points are spread over the whole order."""
    study = rating_study_build(conditions=1, prompts=20, items_per_participant=4)
    condition = study.conditions.get()
    ids = sorted(Response.objects.filter(condition=condition).values_list("pk", flat=True))

    def picked(seed):
        return [
            key
            for source, key, _ in rows.fetchall(
                _pages_sql(connection.vendor), _pages_params(study, condition, random.Random(seed))
            )
        ]

    def expected(seed, counts):
        start = deal_start(tie_break_draws(random.Random(seed)))
        order = {i: tie_break_key(i, (counts[i], DEAL_ORDER_SALT)) for i in ids}
        return sorted(ids, key=lambda i: (counts[i], order[i] < start, order[i], i))[:4]

    assert picked(7) == picked(7)  # the stored seed replays the draw
    zero = dict.fromkeys(ids, 0)
    draws = [picked(seed) for seed in range(400)]
    assert draws == [expected(seed, zero) for seed in range(400)]
    assert len({frozenset(draw) for draw in draws}) >= 15  # of the 20 runs of 4 in the order
    assert Counter(key for draw in draws for key in draw).keys() == set(ids)

    # Dealt ones move on to the next count, whose order is another: the next participant continues there.
    first = participant_enroll(study=study, external_id="first")
    counts = {**zero, **dict.fromkeys(first.assignments.values_list("response_id", flat=True), 1)}
    assert [picked(seed) for seed in range(50)] == [expected(seed, counts) for seed in range(50)]


def test_the_tie_break_hash_stays_within_64_bits_for_large_ids():
    for largest in (2**31 - 1, 2**31 - 2):
        draws = tie_break_draws(random.Random(3))
        expression = tie_break_sql(str(largest), tuple(str(draw) for draw in draws))
        (value,) = rows.fetchone(f"SELECT {expression}", [])
        assert 0 <= value < 2**32 and value == tie_break_key(largest, draws)
        (value,) = rows.fetchone(f"SELECT {deal_order_sql(str(largest), str(2**31 - 1))}", [])
        assert 0 <= value < 2**32 and value == tie_break_key(largest, (2**31 - 1, DEAL_ORDER_SALT))
