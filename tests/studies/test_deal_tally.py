"""Every response's tally, with whether it may be dealt (migration 0018): kept in step with the responses by
the database, read alone by the enrolment statement's deal, which still makes the Python path's choices."""

import itertools
import random

import pytest
from django.db import connection, transaction

from studies import participants
from studies.balancing import response_tallies_rebuild
from studies.models import Assignment, Participant, Response, ResponseTally
from studies.participants import participant_enroll, participant_return
from tests.factories import PromptFactory, ResponseFactory, rating_study_build

from .test_assignment_races import race
from .test_live_assignments import assert_tallies_follow_the_rule

FLAGGED, APPROVED, OK = Response.Review.FLAGGED, Response.Review.APPROVED, Response.Review.OK


def by_rule() -> dict[int, tuple[int, bool]]:
    """Every response's condition and whether it may be dealt (`eligible_responses`)."""
    return {
        r.pk: (r.condition_id, r.sample_index == 0 and r.review != FLAGGED)
        for r in Response.objects.only("condition", "sample_index", "review")
    }


def kept() -> dict[int, tuple[int, bool]]:
    return {t.response_id: (t.condition_id, t.eligible) for t in ResponseTally.objects.all()}


@pytest.mark.django_db
def test_every_response_has_a_tally_that_follows_its_eligibility_and_condition():
    study = rating_study_build(conditions=2, prompts=4, items_per_participant=3, quota_per_condition=50)
    arm0, arm1 = study.conditions.order_by("position")
    assert kept() == by_rule() and len(kept()) == 8  # every response, never dealt: each its row at 0
    assert set(ResponseTally.objects.values_list("live_assignments", flat=True)) == {0}

    other_sample = ResponseFactory(prompt=PromptFactory(study=study), condition=arm0, sample_index=1)
    assert kept()[other_sample.pk] == (arm0.pk, False)

    dealt = participant_enroll(study=study, external_id="first")
    page = dealt.assignments.filter(kind=Assignment.Kind.RESPONSE).first()
    Response.objects.filter(condition=dealt.condition).update(review=FLAGGED)  # many at once, one dealt
    assert kept() == by_rule()
    assert ResponseTally.objects.get(pk=page.response_id).live_assignments == 1  # still counted

    again = Response.objects.get(pk=page.response_id)
    again.review = APPROVED
    again.save()  # the admin's full-row save
    assert kept()[again.pk] == (again.condition_id, True) and kept() == by_rule()

    Response.objects.filter(pk=other_sample.pk).update(condition=arm1, sample_index=0, review=OK)
    assert kept()[other_sample.pk] == (arm1.pk, True)
    Response.objects.filter(pk=other_sample.pk).update(text="edited")  # nothing the tally holds
    assert kept() == by_rule()

    other_sample.delete()
    never_dealt = Response.objects.exclude(assignments__isnull=False).order_by("pk").first()
    with connection.cursor() as cursor:  # a delete that bypasses Django's cascade
        cursor.execute("DELETE FROM studies_response WHERE id = %s", [never_dealt.pk])
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no tally left pointing at it
    assert other_sample.pk not in kept() and never_dealt.pk not in kept()
    assert kept() == by_rule()
    assert response_tallies_rebuild()[0] == 0


class _Rollback(Exception):
    pass


def _deal(study, script, monkeypatch, settings, *, statement: bool) -> list:
    """Runs `script` (ids to enrol and actions between them) with the same sequence of seeds, and returns what
    each newcomer got (their condition, their responses in page order) and whether the tally still equals a
    recount. Everything is rolled back after."""
    settings.PARTICIPANT_ENROL_STATEMENT = statement
    draw = (211 + 7919 * i for i in itertools.count())
    monkeypatch.setattr(participants, "_participant_seed", lambda _study: next(draw))

    def person(external_id):
        return Participant.objects.get(study=study, external_id=external_id)

    got: list = []
    try:
        with transaction.atomic():
            for step in script:
                if isinstance(step, str):
                    p = participant_enroll(study=study, external_id=step)
                    pages = p.assignments.filter(kind=Assignment.Kind.RESPONSE).order_by("position")
                    got.append((step, p.condition_id, list(pages.values_list("response_id", flat=True))))
                    continue
                action, *args = step
                if action == "flag its page":  # a response flagged after it was dealt
                    external_id, nth = args
                    pages = person(external_id).assignments.filter(kind=Assignment.Kind.RESPONSE)
                    dealt = pages.order_by("position")[nth].response_id
                    Response.objects.filter(pk=dealt).update(review=FLAGGED)
                elif action == "unflag":
                    Response.objects.filter(pk=args[0]).update(review=OK)
                elif action == "return":
                    assert participant_return(participant=person(args[0]))
                elif action == "preview":
                    participant_enroll(study=study, external_id="staff", is_preview=True)
            got.append(("tallies wrong", response_tallies_rebuild()[0]))
            raise _Rollback
    except _Rollback:
        pass
    return got


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_statement_deals_as_the_python_path_with_flagged_never_dealt_and_other_samples(
    monkeypatch, settings, requires_postgres
):
    study = rating_study_build(conditions=2, prompts=10, items_per_participant=4, quota_per_condition=50)
    arm0 = study.conditions.get(name="arm0")
    for prompt in study.prompts.all():  # other samples: never dealt
        ResponseFactory(prompt=prompt, condition=arm0, sample_index=1)
    waiting = list(
        Response.objects.filter(condition=arm0, sample_index=0)
        .order_by("-pk")
        .values_list("pk", flat=True)[:2]
    )
    Response.objects.filter(pk__in=waiting).update(review=FLAGGED)  # flagged from the start, unflagged later
    script = [
        *(f"PID{i}" for i in range(4)),
        ("flag its page", "PID0", 0),
        ("flag its page", "PID1", 2),
        "PID4",
        ("unflag", waiting[0]),  # eligible now, never dealt, among responses already dealt once
        "PID5",
        ("return", "PID2"),
        ("preview",),
        *(f"PID{i}" for i in range(6, 10)),
        ("unflag", waiting[1]),
        *(f"PID{i}" for i in range(10, 14)),
    ]

    by_statement = _deal(study, script, monkeypatch, settings, statement=True)
    by_python = _deal(study, script, monkeypatch, settings, statement=False)

    assert by_statement == by_python
    assert by_statement[-1] == ("tallies wrong", 0)
    dealt = {r for _, _, responses in by_python[:-1] for r in responses}
    assert waiting[0] in dealt  # the response unflagged late was dealt, as the least assigned
    assert not dealt & set(Response.objects.filter(sample_index=1).values_list("pk", flat=True))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_enrolments_flags_and_releases_racing_leave_the_tally_equal_to_a_recount(requires_postgres):
    # Reviews flag two responses in one statement (in no particular order) and unflag others, while newcomers
    # are dealt and participants leave: every statement writes tallies the others write. No two reviews touch
    # the same response (two reviews updating the same responses in different orders can deadlock on the
    # responses' own rows, tally or not).
    study = rating_study_build(conditions=1, prompts=36, items_per_participant=8, quota_per_condition=2000)
    leaving = [participant_enroll(study=study, external_id=f"old{i:02d}") for i in range(12)]
    responses = list(Response.objects.filter(condition__study=study).values_list("pk", flat=True))
    random.Random(7).shuffle(responses)
    to_flag, to_unflag = responses[:24], responses[24:]
    Response.objects.filter(pk__in=to_unflag).update(review=FLAGGED)

    def act(i):
        k = i // 4
        if i % 4 == 0:
            return Response.objects.filter(pk__in=to_flag[2 * k : 2 * k + 2]).update(review=FLAGGED)
        if i % 4 == 1:
            return Response.objects.filter(pk=to_unflag[k]).update(review=APPROVED)
        if i % 4 == 2:
            return participant_return(participant=leaving[k])
        return participant_enroll(study=study, external_id=f"new{i:02d}")

    results, errors = race(act, 48)

    assert not errors, errors
    assert len(results) == 48
    assert kept() == by_rule()
    assert ResponseTally.objects.filter(eligible=True).count() == 12  # the unflagged ones
    assert_tallies_follow_the_rule(study)
    assert response_tallies_rebuild()[0] == 0  # nothing for the recount to repair


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_statement_reads_as_many_tallies_as_it_deals(requires_postgres):
    # Migration 0019: each count's responses in an index in the order the deal takes them, so a newcomer's
    # deal reads about as many index entries as they are dealt, not the condition's (118) or a count's group.
    study = rating_study_build(conditions=1, prompts=118, items_per_participant=5, quota_per_condition=1000)

    def entries_read() -> int:
        with connection.cursor() as cursor:  # this transaction's entries returned by the deal's index
            cursor.execute("SELECT pg_stat_get_xact_tuples_returned('responsetally_deal_order'::regclass)")
            return cursor.fetchone()[0]

    read = []
    for i in range(36):  # a round and a half: the 24th deal takes 3 of one count and 2 of the next
        with connection.cursor() as cursor:
            cursor.execute("VACUUM studies_responsetally")  # no entry left by an earlier deal's update
        with transaction.atomic():
            before = entries_read()
            participant_enroll(study=study, external_id=f"P{i:02d}")
            read.append(entries_read() - before)
    assert min(read) >= 5  # the statement dealt them from the tallies
    assert max(read) <= 3 * 5
    counts = sorted(ResponseTally.objects.values_list("live_assignments", flat=True))
    assert counts[0] == 1 and counts[-1] == 2  # balanced: 180 pages over 118 responses
