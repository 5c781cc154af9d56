"""The pairwise kind's schedule: a balanced incomplete design over prompt × condition pair, dealt by live counts
(kinds/pairwise/kind.py), under a rush too."""

from collections import Counter
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from kinds.pairwise.kind import PAIRS, pair_live_counts
from kinds.pairwise.models import PairItem, PairwiseSettings
from studies.design import FrozenDesignError, design_build
from studies.kinds.registry import participant_steps
from studies.models import Condition, PairAttentionCheck, Participant
from studies.participants import participant_advance, participant_enroll, participant_return
from studies.services import study_launch, study_launch_problems
from tests.concurrency import race
from tests.factories import pairwise_study_build

pytestmark = pytest.mark.django_db


def exposure(study):
    """Live regular pages per unordered condition pair, per (left, right), and per condition on the left minus
    on the right."""
    pairs, ordered, sides = Counter(), Counter(), Counter()
    for (_prompt, left, right), n in pair_live_counts(study=study).items():
        pairs[frozenset((left, right))] += n
        ordered[(left, right)] += n
        sides[left] += n
        sides[right] -= n
    return pairs, ordered, sides


def assert_balanced(study, conditions: int, *, pairs_within: int = 1):
    """Condition pairs within `pairs_within` of each other; each pair's two orders within one, hence each
    condition's left and right within the number of its partners."""
    pairs, ordered, sides = exposure(study)
    assert len(pairs) == conditions * (conditions - 1) // 2, pairs
    assert max(pairs.values()) - min(pairs.values()) <= pairs_within, pairs
    for left, right in ordered:
        assert abs(ordered[(left, right)] - ordered[(right, left)]) <= 1, ordered
    assert all(abs(n) <= conditions - 1 for n in sides.values()), sides


def test_a_participant_goes_through_consent_instructions_the_pairs_and_done():
    study = pairwise_study_build()
    assert participant_steps(study) == ["consent", "instructions", PAIRS, "done"]


def test_every_condition_pair_and_every_side_get_equal_exposure():
    study = pairwise_study_build(conditions=3, prompts=12, items_per_participant=4, quota_per_condition=100)
    for i in range(15):
        participant_enroll(study=study, external_id=f"P{i}")
        assert_balanced(study, 3)
    assert PairItem.objects.filter(participant__study=study).count() == 15 * 4


def test_each_participant_sees_each_prompt_at_most_once_and_the_database_refuses_a_second():
    study = pairwise_study_build(conditions=4, prompts=8, items_per_participant=8)
    participant = participant_enroll(study=study, external_id="P1")
    prompts = list(participant.pair_items.values_list("prompt", flat=True))
    assert len(prompts) == 8 and len(set(prompts)) == 8
    page = participant.pair_items.first()
    with pytest.raises(IntegrityError), transaction.atomic():
        PairItem.objects.create(
            participant=participant, position=99, prompt=page.prompt, left=page.right, right=page.left
        )


def test_both_replies_of_a_pair_answer_its_prompt_from_two_conditions():
    study = pairwise_study_build(conditions=3, prompts=6, items_per_participant=5)
    participant = participant_enroll(study=study, external_id="P1")
    for page in participant.pair_items.select_related("left", "right"):
        assert page.left.prompt_id == page.right.prompt_id == page.prompt_id
        assert page.left.condition_id != page.right.condition_id


def test_left_and_right_are_counterbalanced_within_each_rater():
    study = pairwise_study_build(conditions=2, prompts=10, items_per_participant=4)
    for i in range(6):
        participant = participant_enroll(study=study, external_id=f"P{i}")
        lefts = Counter(participant.pair_items.values_list("left__condition__name", flat=True))
        assert lefts == {"arm0": 2, "arm1": 2}, lefts


@pytest.mark.parametrize("items", [4, 5])
def test_the_focal_design_gives_every_participant_pairs_involving_their_own_condition(items):
    for seed in range(
        4
    ):  # studies of other seeds (and row ids) deal in other orders: the bound holds for each
        study = pairwise_study_build(
            conditions=3, prompts=12, items_per_participant=items, focal_design=True, quota_per_condition=100,
            seed=seed,
        )  # fmt: skip
        seen = Counter()
        for i in range(9):
            participant = participant_enroll(study=study, external_id=f"P{i}")
            seen[participant.condition.name] += 1
            mine = Counter()
            for page in participant.pair_items.select_related("left", "right"):
                assert participant.condition_id in (page.left.condition_id, page.right.condition_id)
                mine[frozenset((page.left.condition_id, page.right.condition_id))] += 1
            assert max(mine.values()) - min(mine.values()) <= 1, mine  # spread over their condition's pairs
        assert seen == {"arm0": 3, "arm1": 3, "arm2": 3}  # the spine balances the focal conditions
        # Each participant deals among their own condition's pairs only: the pairs stay within two.
        assert_balanced(study, 3, pairs_within=2)


def test_without_the_focal_design_everyone_is_counted_under_the_baseline():
    study = pairwise_study_build(conditions=3, prompts=12)
    names = {participant_enroll(study=study, external_id=f"P{i}").condition.name for i in range(4)}
    assert names == {"arm0"}


def test_known_answer_pairs_come_after_their_regular_pairs_with_the_good_reply_on_either_side():
    study = pairwise_study_build(
        conditions=3, prompts=12, items_per_participant=4, known_answers=(2, 9), quota_per_condition=100
    )
    sides = set()
    for i in range(12):
        participant = participant_enroll(study=study, external_id=f"P{i}")
        pages = list(participant.pair_items.order_by("position"))
        checks = [page.position for page in pages if page.is_check]
        assert checks == [2, 5], checks  # after 2 regular pairs, and one past the end goes last
        sides |= {page.good_on_left for page in pages if page.is_check}
    assert sides == {True, False}


def test_pairs_given_back_by_a_returning_participant_are_dealt_again():
    study = pairwise_study_build(conditions=2, prompts=4, items_per_participant=4)
    first = participant_enroll(study=study, external_id="P1")
    taken = Counter(first.pair_items.values_list("prompt", flat=True))
    assert sum(pair_live_counts(study=study).values()) == 4
    participant_return(participant=first)
    assert sum(pair_live_counts(study=study).values()) == 0
    second = participant_enroll(study=study, external_id="P2")
    assert Counter(second.pair_items.values_list("prompt", flat=True)) == taken


def test_a_study_launches_only_with_a_baseline_two_conditions_and_enough_prompts():
    study = pairwise_study_build(conditions=3, prompts=4, items_per_participant=5, state="draft")
    Condition.objects.filter(study=study).update(is_baseline=False)
    problems = study_launch_problems(study=study)
    assert any("baseline" in p for p in problems)
    assert any("4 prompts" in p and "5" in p for p in problems)
    alone = pairwise_study_build(conditions=1, prompts=4, state="draft")
    assert any("two conditions" in p for p in study_launch_problems(study=alone))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_simultaneous_arrivals_keep_condition_pairs_and_sides_within_one(requires_postgres):
    study = pairwise_study_build(conditions=4, prompts=20, items_per_participant=5, quota_per_condition=100)

    results, errors = race(lambda i: participant_enroll(study=study, external_id=f"PID{i:03d}"), 40)

    assert not errors, errors
    assert Participant.objects.filter(study=study).count() == 40
    assert PairItem.objects.filter(participant__study=study).count() == 40 * 5
    assert_balanced(study, 4)


def test_the_pairwise_settings_and_known_answer_pairs_are_frozen_with_the_design():
    study = study_launch(study=pairwise_study_build(known_answers=(1,), state="draft"))
    design = design_build(study)
    assert design["kind_settings"]["focal_design"] is False
    assert [c["poor_reply"] for c in design["known_answer_pairs"]] == ["Whatever."]
    settings = PairwiseSettings.objects.get(study=study)
    settings.focal_design = True
    with pytest.raises(FrozenDesignError, match="kind's settings"):
        settings.save()
    with pytest.raises(FrozenDesignError, match="known-answer pairs"):
        PairAttentionCheck.objects.create(
            study=study, emotion_label="x", situation="x", speaker_utterance="x", good_reply="x", poor_reply="y",
            after_item=0,
        )  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_a_rush_of_visitors_who_never_consent_frees_its_pairs_after_the_consent_hold(
    requires_postgres, settings
):
    """Pairs are dealt at enrolment (the consent page opens with the participant's place taken), so a rush of
    visitors who only open the consent page holds pairs: balanced among themselves, and only for
    PARTICIPANT_CONSENT_HOLD_MINUTES, not the study's time limit. Those who agreed keep theirs for the limit."""
    settings.PARTICIPANT_CONSENT_HOLD_MINUTES = 10
    study = pairwise_study_build(conditions=3, prompts=12, items_per_participant=3, quota_per_condition=100)
    study.time_limit_minutes = 30
    study.save(update_fields=["time_limit_minutes"])

    results, errors = race(lambda i: participant_enroll(study=study, external_id=f"LOOK{i:02d}"), 30)
    assert not errors, errors
    assert set(Participant.objects.filter(study=study).values_list("step", flat=True)) == {"consent"}
    assert_balanced(study, 3)
    later = timezone.now() + timedelta(minutes=11)  # past the consent hold, well within the time limit
    assert pair_live_counts(study=study, now=later) == Counter()

    Participant.objects.filter(study=study).update(last_seen_at=timezone.now() - timedelta(minutes=11))
    results, errors = race(lambda i: participant_enroll(study=study, external_id=f"TAKE{i:02d}"), 30)
    assert not errors, errors
    for participant in results.values():
        assert participant_advance(participant=participant, from_step=Participant.Step.CONSENT)
    pairs, _ordered, _sides = exposure(study)  # the lookers no longer count: only the 30 who agreed
    assert sum(pairs.values()) == 30 * 3
    assert_balanced(study, 3)
    assert sum(pair_live_counts(study=study, now=later).values()) == 30 * 3  # agreed: held for the limit
