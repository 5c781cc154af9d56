"""`ResponseTally`, the count of live assignments enrolment deals by, kept by the database's triggers
(migration 0010): it follows the balance rule (`response_live_counts`, studies/balancing.py) through
everything that adds or removes a participant's pages, on PostgreSQL and on SQLite, under concurrent
enrolments and releases too."""

import importlib
import io
import random
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from studies.balancing import response_tallies_rebuild
from studies.kinds.rating import response_live_counts
from studies.models import Participant, Response, ResponseTally
from studies.participants import (
    participant_advance,
    participant_complete,
    participant_enroll,
    participant_return,
    participant_screen_out,
    participants_release_stale,
)
from tests.factories import rating_study_build

from .helpers import answer_directly, sqlite_manage
from .test_assignment_races import race

migration = importlib.import_module("studies.migrations.0010_responsetally")


def tallies(condition) -> dict[int, int]:
    """Each response of the condition with its tally (no row: 0)."""
    kept = ResponseTally.objects.filter(response__condition=condition)
    responses = Response.objects.filter(condition=condition).values_list("id", flat=True)
    return dict.fromkeys(responses, 0) | dict(kept.values_list("response", "live_assignments"))


def assert_tallies_follow_the_rule(study) -> None:
    for condition in study.conditions.all():
        rule = response_live_counts(condition=condition)
        kept = tallies(condition)
        assert {key: kept[key] for key in rule} == rule, condition.name


@pytest.mark.django_db
def test_the_count_follows_the_rule_through_every_way_a_participant_comes_and_goes():
    study = rating_study_build(conditions=2, prompts=6, items_per_participant=3, quota_per_condition=50)
    assert all(n == 0 for c in study.conditions.all() for n in tallies(c).values())

    people = [participant_enroll(study=study, external_id=f"p{i}") for i in range(6)]
    assert sum(sum(tallies(c).values()) for c in study.conditions.all()) == 18
    assert_tallies_follow_the_rule(study)

    preview = participant_enroll(study=study, external_id="look", is_preview=True)
    assert preview.assignments.count() == 3
    assert_tallies_follow_the_rule(study)  # a staff preview moves nothing

    done, leaving, refusing, deleted, partly = people[:5]
    for page in done.assignments.all():
        answer_directly(page)
    assert participant_complete(participant=done)
    answer_directly(partly.assignments.order_by("position").first())
    assert participant_return(participant=partly)  # the answered page keeps counting, the others go back
    assert participant_return(participant=leaving)
    assert participant_screen_out(participant=refusing)
    deleted.delete()  # an admin deleting a participant: the pages go, and their count with them
    assert_tallies_follow_the_rule(study)

    participant_advance(participant=people[5], from_step=Participant.Step.CONSENT)
    Participant.objects.filter(pk=people[5].pk).update(last_seen_at=timezone.now() - timedelta(days=1))
    assert participants_release_stale() == 1
    assert_tallies_follow_the_rule(study)
    assert (
        sum(sum(tallies(c).values()) for c in study.conditions.all()) == 3 + 1
    )  # done's three, partly's one


@pytest.mark.django_db
def test_a_stale_participant_s_items_go_to_the_next_newcomer_who_finds_them():
    # Four responses, two per participant: `first` and `second` hold all four once each. When `first` goes
    # stale, the next newcomer releases them before the deal and so gets exactly their two, now the least
    # assigned; dealt before the release, the four would tie and the newcomer get any two.
    study = rating_study_build(conditions=1, prompts=4, items_per_participant=2, quota_per_condition=50)
    first = participant_enroll(study=study, external_id="first")
    participant_enroll(study=study, external_id="second")
    held = set(first.assignments.values_list("response_id", flat=True))
    Participant.objects.filter(pk=first.pk).update(last_seen_at=timezone.now() - timedelta(days=1))
    assert sorted(tallies(first.condition).values()) == [1, 1, 1, 1]  # counted here until released

    newcomer = participant_enroll(study=study, external_id="newcomer")

    assert set(newcomer.assignments.values_list("response_id", flat=True)) == held
    first.refresh_from_db()
    assert first.status == Participant.Status.TIMED_OUT
    assert_tallies_follow_the_rule(study)


@pytest.mark.django_db
def test_the_fill_counts_existing_pages_as_the_triggers_count_them():
    """The rebuild's fill (migration 0010's, with each tally's condition since 0015) into an empty table."""
    study = rating_study_build(conditions=2, prompts=5, items_per_participant=3, quota_per_condition=50)
    people = [participant_enroll(study=study, external_id=f"p{i}") for i in range(5)]
    participant_enroll(study=study, external_id="look", is_preview=True)
    answer_directly(people[0].assignments.first())
    participant_return(participant=people[0])
    kept = {c.pk: tallies(c) for c in study.conditions.all()}
    ResponseTally.objects.all().delete()

    response_tallies_rebuild()

    assert {c.pk: tallies(c) for c in study.conditions.all()} == kept
    assert_tallies_follow_the_rule(study)
    assert all(
        t.condition_id == t.response.condition_id for t in ResponseTally.objects.select_related("response")
    )


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_enrolments_racing_releases_over_the_same_responses_neither_deadlock_nor_miscount(requires_postgres):
    # Ten responses, eight a participant: every enrolment and every release touches most of them, in no
    # particular order (the responses a newcomer gets, the pages a release deletes). Three rounds: with the
    # triggers writing in any other order than the responses' ids, five runs in six ended in a deadlock.
    study = rating_study_build(conditions=1, prompts=10, items_per_participant=8, quota_per_condition=2000)
    for round_ in range(3):
        leaving = [participant_enroll(study=study, external_id=f"old{round_}-{i:02d}") for i in range(32)]
        random.Random(round_).shuffle(leaving)
        for participant in leaving[:8]:  # stale: the arrivals release them before they deal
            Participant.objects.filter(pk=participant.pk).update(
                last_seen_at=timezone.now() - timedelta(days=1)
            )

        def act(i, leaving=leaving, round_=round_):
            if i % 2 == 0:
                return participant_return(participant=leaving[8 + i // 2])
            return participant_enroll(study=study, external_id=f"new{round_}-{i:02d}")

        results, errors = race(act, 48)

        assert not errors, errors
        assert len(results) == 48
        gone = Participant.objects.filter(study=study, external_id__startswith=f"old{round_}-")
        assert sorted(gone.values_list("status", flat=True)) == ["returned"] * 24 + ["timed_out"] * 8
        assert_tallies_follow_the_rule(study)
        # Only the newcomers' pages are left: 24 a round, eight each.
        assert sum(tallies(study.conditions.get()).values()) == 8 * 24 * (round_ + 1)


def test_sqlite_keeps_the_count_with_its_own_triggers(tmp_path):
    """`make run`'s database: the demo study migrated and seeded on SQLite, then participants enrolled, one
    returned and one deleted; the count still follows the rule."""
    script = (
        "from studies.models import ResponseTally, Study\n"
        "from studies.kinds.rating import response_live_counts\n"
        "from studies.participants import participant_enroll, participant_return\n"
        "study = Study.objects.get(slug='demo')\n"
        "before = sum(ResponseTally.objects.values_list('live_assignments', flat=True))\n"
        "people = [participant_enroll(study=study, external_id=f'p{i}') for i in range(6)]\n"
        "participant_enroll(study=study, external_id='look', is_preview=True)\n"
        "participant_return(participant=people[0]); people[1].delete()\n"
        "kept = dict(ResponseTally.objects.values_list('response', 'live_assignments'))\n"
        "rules = [response_live_counts(condition=c) for c in study.conditions.all()]\n"
        "ok = all(kept.get(key, 0) == n for rule in rules for key, n in rule.items())\n"
        "pages = sum(p.assignments.filter(kind='response').count() for p in people[2:])\n"
        "print('counted', sum(kept.values()) - before == pages > 0, ok)\n"
    )
    manage = sqlite_manage(tmp_path)
    manage("migrate", "--noinput")
    manage("seed_demo")
    assert manage("shell", "-c", script).split()[-3:] == ["counted", "True", "True"]


@pytest.mark.django_db
def test_tallies_rebuild_repairs_what_bypassed_the_triggers():
    study = rating_study_build(conditions=2, prompts=5, items_per_participant=3, quota_per_condition=50)
    for i in range(4):
        participant_enroll(study=study, external_id=f"p{i}")
    kept = {c.pk: tallies(c) for c in study.conditions.all()}
    first, second, *_ = ResponseTally.objects.order_by("response")
    ResponseTally.objects.filter(pk=first.pk).update(live_assignments=9)
    second.delete()

    out = io.StringIO()
    call_command("tallies_rebuild", stdout=out)

    assert "2 tallies were wrong" in out.getvalue()
    assert {c.pk: tallies(c) for c in study.conditions.all()} == kept
    assert response_tallies_rebuild()[0] == 0  # nothing left to repair


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_tallies_rebuilt_while_participants_come_and_go_stay_right(requires_postgres):
    study = rating_study_build(conditions=1, prompts=10, items_per_participant=8, quota_per_condition=500)
    leaving = [participant_enroll(study=study, external_id=f"old{i:02d}") for i in range(12)]
    ResponseTally.objects.update(live_assignments=0)  # wrong before the race: the rebuilds must repair it

    def act(i):
        if i % 4 == 0:
            return response_tallies_rebuild()
        if i % 4 == 1:
            return participant_return(participant=leaving[i // 4])
        return participant_enroll(study=study, external_id=f"new{i:02d}")

    results, errors = race(act, 48)

    assert not errors, errors
    assert len(results) == 48
    assert_tallies_follow_the_rule(study)
    assert (
        sum(tallies(study.conditions.get()).values()) == 8 * 24
    )  # the newcomers' pages: the 12 old returned
