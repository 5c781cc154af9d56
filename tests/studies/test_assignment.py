"""Balanced assignment: conditions, items, attention checks, situations, and giving back abandoned work."""

from collections import Counter
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from kinds.rating.kind import response_live_counts
from studies.models import Assignment, Participant, Response, Study, StudySituation
from studies.participants import (
    TOUCH_INTERVAL,
    ParticipantCannotRestart,
    StudyFull,
    StudyNotOpen,
    participant_enroll,
    participant_return,
    participant_touch,
    participants_release_stale,
)
from tests.factories import (
    AttentionCheckFactory,
    ResponseFactory,
    SituationFactory,
    StudyFactory,
    rating_study_build,
)

from .helpers import answer_directly

pytestmark = pytest.mark.django_db


def enroll_many(study, n, prefix="p"):
    return [participant_enroll(study=study, external_id=f"{prefix}{i}") for i in range(n)]


def condition_sizes(study):
    return Counter(study.participants.filter(is_preview=False).values_list("condition__name", flat=True))


def test_it_gives_each_condition_the_same_number_of_participants():
    study = rating_study_build(conditions=3, prompts=10, quota_per_condition=50)
    enroll_many(study, 14)
    sizes = condition_sizes(study)
    assert set(sizes) == {"arm0", "arm1", "arm2"}
    assert max(sizes.values()) - min(sizes.values()) <= 1


def test_it_never_fills_a_condition_beyond_its_quota_and_a_full_study_writes_nothing():
    study = rating_study_build(conditions=2, prompts=10, quota_per_condition=5)
    arm0 = study.conditions.get(name="arm0")
    arm0.quota = 2
    arm0.save()
    enroll_many(study, 7)
    assert condition_sizes(study) == {"arm0": 2, "arm1": 5}
    before = (Participant.objects.count(), Assignment.objects.count())
    with pytest.raises(StudyFull):
        participant_enroll(study=study, external_id="one-too-many")
    assert (Participant.objects.count(), Assignment.objects.count()) == before


def test_a_condition_that_is_not_enrolling_takes_nobody():
    study = rating_study_build(conditions=2, prompts=10)
    study.conditions.filter(name="arm1").update(enrolling=False)
    enroll_many(study, 4)
    assert condition_sizes(study) == {"arm0": 4}


def test_the_same_external_id_resumes_instead_of_enrolling_twice():
    study = rating_study_build()
    first = participant_enroll(study=study, external_id="PID-1")
    again = participant_enroll(study=study, external_id="PID-1")
    assert again.pk == first.pk
    assert Participant.objects.filter(study=study).count() == 1
    assert Assignment.objects.filter(participant=first).count() == study.items_per_participant


@pytest.mark.parametrize("status", [Participant.Status.RETURNED, Participant.Status.TIMED_OUT])
def test_a_returned_or_timed_out_participant_cannot_restart(status):
    study = rating_study_build()
    participant = participant_enroll(study=study, external_id="PID-1")
    Participant.objects.filter(pk=participant.pk).update(status=status)
    with pytest.raises(ParticipantCannotRestart) as raised:
        participant_enroll(study=study, external_id="PID-1")
    assert raised.value.participant.pk == participant.pk
    assert Participant.objects.filter(study=study).count() == 1


@pytest.mark.parametrize("state", [Study.State.DRAFT, Study.State.PAUSED, Study.State.CLOSED])
def test_only_a_live_study_takes_newcomers_but_staff_can_preview_it(state):
    study = rating_study_build(state=state)
    with pytest.raises(StudyNotOpen):
        participant_enroll(study=study, external_id="PID-1")
    assert not Participant.objects.exists()
    preview = participant_enroll(study=study, external_id="preview-1", is_preview=True)
    assert preview.is_preview and preview.assignments.count() == study.items_per_participant


def test_an_active_participant_of_a_paused_study_resumes():
    study = rating_study_build()
    participant = participant_enroll(study=study, external_id="PID-1")
    Study.objects.filter(pk=study.pk).update(state=Study.State.PAUSED)
    study.refresh_from_db()
    assert participant_enroll(study=study, external_id="PID-1").pk == participant.pk


def test_staff_previews_take_no_slot_and_do_not_move_the_item_balance():
    study = rating_study_build(conditions=1, prompts=3, quota_per_condition=1, items_per_participant=3)
    for i in range(3):
        participant_enroll(study=study, external_id=f"preview-{i}", is_preview=True)
    condition = study.conditions.get()
    assert set(response_live_counts(condition=condition).values()) == {0}
    real = participant_enroll(study=study, external_id="PID-1")
    assert real.condition == condition
    with pytest.raises(StudyFull):
        participant_enroll(study=study, external_id="PID-2")


def test_every_response_gets_within_one_of_the_others_assignments():
    study = rating_study_build(conditions=2, prompts=13, items_per_participant=4, quota_per_condition=100)
    enroll_many(study, 22)
    for condition in study.conditions.all():
        counts = response_live_counts(condition=condition)
        assert len(counts) == 13
        assert max(counts.values()) - min(counts.values()) <= 1, counts


def test_a_participant_gets_distinct_unflagged_first_samples_of_their_own_condition():
    study = rating_study_build(conditions=2, prompts=6, items_per_participant=4)
    arm0 = study.conditions.get(name="arm0")
    flagged = list(arm0.responses.all()[:2])
    Response.objects.filter(pk__in=[r.pk for r in flagged]).update(review=Response.Review.FLAGGED)
    for prompt in study.prompts.all():
        ResponseFactory(prompt=prompt, condition=arm0, sample_index=1)
    for i in range(6):
        participant = participant_enroll(study=study, external_id=f"p{i}")
        responses = [a.response for a in participant.assignments.all()]
        assert len({r.pk for r in responses}) == 4
        assert all(r.condition_id == participant.condition_id and r.sample_index == 0 for r in responses)
        assert not {r.pk for r in responses} & {r.pk for r in flagged}


def test_the_order_is_drawn_from_a_stored_per_participant_seed():
    study = rating_study_build(conditions=1, prompts=30, items_per_participant=10, quota_per_condition=100)
    participants = enroll_many(study, 4)
    seeds = {p.seed for p in participants}
    assert len(seeds) == 4 and 0 not in seeds
    orders = {tuple(p.assignments.values_list("response__prompt_id", flat=True)) for p in participants}
    assert len(orders) == 4  # not the prompts' natural order each time


def test_attention_checks_are_inserted_after_their_item():
    study = rating_study_build(conditions=1, prompts=6, items_per_participant=4)
    first = AttentionCheckFactory(study=study, after_item=0)
    middle = AttentionCheckFactory(study=study, after_item=2)
    late = AttentionCheckFactory(study=study, after_item=99)
    participant = participant_enroll(study=study, external_id="p")
    pages = list(participant.assignments.order_by("position"))
    assert [p.position for p in pages] == list(range(7))
    assert [p.kind for p in pages] == [
        "attention",
        "response",
        "response",
        "attention",
        "response",
        "response",
        "attention",
    ]
    assert [pages[0].attention_check, pages[3].attention_check, pages[6].attention_check] == [
        first,
        middle,
        late,
    ]


def check_places(study) -> list[int]:
    """How many regular items each participant of `study` meets before their (one) attention check."""
    return [
        p.assignments.get(kind=Assignment.Kind.ATTENTION).position for p in study.participants.order_by("pk")
    ]


def test_without_a_range_every_participant_meets_the_check_at_the_same_place():
    study = rating_study_build(conditions=1, prompts=8, items_per_participant=6, quota_per_condition=100)
    AttentionCheckFactory(study=study, after_item=3)
    enroll_many(study, 12)
    assert set(check_places(study)) == {3}


def test_with_a_range_each_participant_meets_the_check_at_their_own_place_within_it():
    study = rating_study_build(conditions=1, prompts=8, items_per_participant=6, quota_per_condition=100)
    AttentionCheckFactory(study=study, after_item=1, after_item_max=4)
    enroll_many(study, 40)
    places = check_places(study)
    # every place of the range is used (each is missed by 40 draws with probability 4 x 0.75**40 < 1e-4)
    assert set(places) == {1, 2, 3, 4}
    for participant in study.participants.all():
        pages = list(participant.assignments.order_by("position").values_list("position", "kind"))
        assert [position for position, _ in pages] == list(range(7))
        assert Counter(kind for _, kind in pages) == {"response": 6, "attention": 1}


def test_a_range_ending_before_it_starts_is_refused():
    study = rating_study_build(conditions=1, prompts=4, items_per_participant=2)
    check = AttentionCheckFactory.build(study=study, after_item=3, after_item_max=1)
    with pytest.raises(ValidationError, match="comes before the first"):
        check.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        check.save()


def test_a_questionnaire_study_balances_participants_over_its_situations():
    study = StudyFactory(kind=Study.Kind.QUESTIONNAIRE, state=Study.State.LIVE, quota_per_condition=100)
    study.conditions.create(name="human")
    situations = [SituationFactory() for _ in range(4)]
    for situation in situations:
        StudySituation.objects.create(study=study, situation=situation)
    participants = enroll_many(study, 10)
    per_situation = Counter()
    for participant in participants:
        (page,) = participant.assignments.all()
        assert page.kind == Assignment.Kind.SITUATION
        per_situation[page.situation_id] += 1
    assert set(per_situation) == {s.pk for s in situations}
    assert max(per_situation.values()) - min(per_situation.values()) <= 1


def test_a_stale_participant_gives_back_the_slot_and_unanswered_items():
    study = rating_study_build(conditions=1, prompts=3, items_per_participant=3, quota_per_condition=1)
    gone = participant_enroll(study=study, external_id="gone")
    answered = gone.assignments.order_by("position").first()
    answer_directly(answered)
    with pytest.raises(StudyFull):
        participant_enroll(study=study, external_id="waiting")

    later = timezone.now() + timedelta(minutes=study.time_limit_minutes + 1)
    assert participants_release_stale(now=later) == 1
    assert participants_release_stale(now=later) == 0  # idempotent
    gone.refresh_from_db()
    assert gone.status == Participant.Status.TIMED_OUT and gone.finished_at == later
    assert list(gone.assignments.all()) == [answered]  # the answered one stays, with its rating

    newcomer = participant_enroll(study=study, external_id="waiting", now=later)
    assert newcomer.condition == gone.condition
    # The answered rating still counts next to the newcomer's three live assignments.
    counts = response_live_counts(condition=newcomer.condition)
    assert counts[answered.response_id] == 2 and sorted(counts.values()) == [1, 1, 2]


def test_a_stale_participant_is_not_counted_even_before_the_release_runs():
    study = rating_study_build(conditions=2, prompts=5, quota_per_condition=10)
    first = participant_enroll(study=study, external_id="first")
    other = participant_enroll(study=study, external_id="other")
    assert other.condition != first.condition
    Participant.objects.filter(pk=first.pk).update(last_seen_at=timezone.now() - timedelta(days=1))
    # Enrollment releases lazily, then counts: 0 in first's condition against 1, so the newcomer goes there.
    newcomer = participant_enroll(study=study, external_id="newcomer")
    assert newcomer.condition == first.condition
    first.refresh_from_db()
    assert first.status == Participant.Status.TIMED_OUT


def test_a_participant_who_returns_gives_back_slot_and_items():
    study = rating_study_build(conditions=1, prompts=3, items_per_participant=3, quota_per_condition=1)
    leaving = participant_enroll(study=study, external_id="leaving")
    assert participant_return(participant=leaving) is True
    assert participant_return(participant=leaving) is False
    leaving.refresh_from_db()
    assert leaving.status == Participant.Status.RETURNED and not leaving.assignments.exists()
    newcomer = participant_enroll(study=study, external_id="newcomer")
    assert newcomer.assignments.count() == 3


def test_touching_a_participant_past_the_time_limit_times_them_out_instead_of_reviving_them():
    study = rating_study_build()
    fresh = participant_enroll(study=study, external_id="fresh")
    stale = participant_enroll(study=study, external_id="stale")
    Participant.objects.filter(pk=stale.pk).update(last_seen_at=timezone.now() - timedelta(hours=2))
    stale.refresh_from_db()
    assert participant_touch(participant=fresh).status == Participant.Status.ACTIVE
    assert participant_touch(participant=stale).status == Participant.Status.TIMED_OUT
    assert not stale.assignments.exists()


def test_touching_writes_last_seen_at_most_once_per_interval():
    study = rating_study_build()
    participant = participant_enroll(study=study, external_id="toucher")
    enrolled_at = participant.last_seen_at

    participant_touch(participant=participant, now=enrolled_at + TOUCH_INTERVAL / 2)
    assert Participant.objects.get(pk=participant.pk).last_seen_at == enrolled_at  # fresh: no write

    later = enrolled_at + TOUCH_INTERVAL + timedelta(seconds=1)
    participant_touch(participant=participant, now=later)
    assert Participant.objects.get(pk=participant.pk).last_seen_at == later


def test_a_condition_with_nothing_to_show_takes_nobody():
    """The kinds' enrollable rule, read by enrolment's counting query: a rating condition whose responses are
    all flagged (or not sample 0) takes nobody; a questionnaire study without a situation takes nobody."""
    study = rating_study_build(conditions=2, prompts=4, items_per_participant=2, quota_per_condition=100)
    Response.objects.filter(condition__name="arm0").update(review=Response.Review.FLAGGED)
    enroll_many(study, 4)
    assert condition_sizes(study) == {"arm1": 4}
    Response.objects.filter(condition__name="arm1").update(sample_index=1)
    with pytest.raises(StudyFull):
        participant_enroll(study=study, external_id="nothing-left")

    questionnaire = StudyFactory(kind=Study.Kind.QUESTIONNAIRE, state=Study.State.LIVE, quota_per_condition=9)
    questionnaire.conditions.create(name="human")
    with pytest.raises(StudyFull):
        participant_enroll(study=questionnaire, external_id="no-situation")
    StudySituation.objects.create(study=questionnaire, situation=SituationFactory())
    assert participant_enroll(study=questionnaire, external_id="one-situation").condition.name == "human"
