"""The stored flags of the live status page (studies/declared_flags.py) stay equal to the analysis's own
computation (the rating kind's `exclusion_flags`, `participant_exclusion_flags` under the declared rules) whatever
changes what the rules read, and under answers racing the page's refreshes."""

import pytest

from kinds.rating.live_exclusions import rating_exclusion_flags
from kinds.rating.models import Rating
from kinds.rating.services import rating_submit
from studies.declared_flags import flagged_by_rules, flags_refresh
from studies.models import Assignment, FlagsStale, Participant, ParticipantAuthenticity, Study
from studies.participants import participant_enroll, participant_return
from tests.factories import (
    ConditionFactory,
    ParticipantFactory,
    PromptFactory,
    ResponseFactory,
    StudyFactory,
    rating_study_build,
)
from tests.races import writers_against_readers

EVERY_RULE = {
    "attention_checks": True,
    "incomplete": True,
    "too_fast": {"min_median_ms": 1000},
    "straight_lining": {"min_items": 3, "corroborating_median_ms": 800, "identical_alone": True},
    "authenticity": True,
}


def analysis_flags(study: Study) -> dict[int, list[str]]:
    """Whom the analysis's computation excludes, from every rated row of the study, and by which rules."""
    return {pid: rules for pid, rules in rating_exclusion_flags(study=study).items() if rules}


def rated(person: Participant, responses, *, values, ms: int) -> None:
    for position, (response, value) in enumerate(zip(responses, values, strict=True)):
        page = Assignment.objects.create(participant=person, position=position, response=response)
        Rating.objects.create(assignment=page, value=value, response_time_ms=ms)


@pytest.mark.django_db
def test_stored_flags_equal_the_analysis_with_every_rule_firing_through_every_kind_of_change():
    study = StudyFactory(slug="every-rule", state=Study.State.LIVE, exclusion_rules=EVERY_RULE)
    arm = ConditionFactory(study=study, name="human", is_baseline=True)
    responses = [ResponseFactory(prompt=PromptFactory(study=study), condition=arm) for _ in range(4)]
    done = Participant.Status.COMPLETED

    def person(name, *, values=(1, 2, 3, 1), ms=5000, **fields):
        fields.setdefault("status", done)
        someone = ParticipantFactory(study=study, condition=arm, external_id=name, **fields)
        rated(someone, responses, values=values, ms=ms)
        return someone

    fast = person("fast", ms=300)
    straight = person("straight", values=(2, 2, 2, 2))
    careless = person("careless", flagged_for_exclusion=True, attention_failures=3)
    gone = person("gone", status=Participant.Status.RETURNED)
    bot = person("bot")
    ParticipantAuthenticity.objects.create(participant=bot, score=95, flagged=True, excluded=True)
    kept = person("kept")
    person("preview", ms=100, is_preview=True)  # never counted
    ParticipantFactory(study=study, condition=arm, external_id="unrated", status=Participant.Status.RETURNED)

    expected = analysis_flags(study)
    assert flagged_by_rules(study) == expected
    words = {word for rules in expected.values() for word in rules}
    assert words == {"failed attention checks", "not finished", "too fast", "straight-lining", "authenticity"}
    assert set(expected) == {fast.pk, straight.pk, careless.pk, gone.pk, bot.pk}
    assert not FlagsStale.objects.filter(study_id=study.pk).exists()

    def changed(change) -> None:
        change()
        study.refresh_from_db()
        assert flagged_by_rules(study) == analysis_flags(study)

    # A rating changed, a rating deleted, a rating added.
    changed(lambda: Rating.objects.filter(assignment__participant=kept).update(response_time_ms=200))
    changed(lambda: Assignment.objects.filter(participant=fast).delete())  # its ratings with them
    changed(lambda: rated(fast, responses[:3], values=(3, 3, 3), ms=4000))
    # The participant's status, attention checks, authenticity verdict.
    changed(lambda: Participant.objects.filter(pk=gone.pk).update(status=done))
    changed(lambda: Participant.objects.filter(pk=careless.pk).update(flagged_for_exclusion=False))
    changed(lambda: ParticipantAuthenticity.objects.filter(participant=bot).update(excluded=False))
    changed(lambda: ParticipantAuthenticity.objects.create(participant=straight, score=90, excluded=True))
    # The study's declared rules: off, then on again.
    changed(
        lambda: Study.objects.filter(pk=study.pk).update(exclusion_rules={**EVERY_RULE, "too_fast": None})
    )
    changed(lambda: Study.objects.filter(pk=study.pk).update(exclusion_rules=EVERY_RULE))
    assert flagged_by_rules(study) == analysis_flags(study) != {}
    # Deleting a participant takes their flags along.
    Participant.objects.filter(pk=straight.pk).delete()
    assert flagged_by_rules(study) == analysis_flags(study)
    assert straight.pk not in flagged_by_rules(study)


@pytest.mark.django_db
def test_many_marked_participants_are_computed_in_one_pass_over_the_study_with_the_same_flags(monkeypatch):
    from studies import declared_flags

    study = rating_study_build(conditions=1, prompts=3, items_per_participant=3, exclusion_rules=EVERY_RULE)
    responses = list(study.conditions.get().responses.all())
    done = Participant.Status.COMPLETED
    for values, ms in [((1, 2, 3), 300), ((2, 2, 2), 4000), ((1, 2, 1), 4000), ((3, 1, 2), 500)]:
        someone = ParticipantFactory(study=study, condition=responses[0].condition, status=done)
        rated(someone, responses, values=values, ms=ms)
    assert flags_refresh(study) == 4  # batch by batch
    Rating.objects.filter(assignment__participant__study=study).update(response_time_ms=200)
    monkeypatch.setattr(declared_flags, "WHOLE_STUDY_ABOVE", 2)
    assert flags_refresh(study) == 4  # one pass
    assert flagged_by_rules(study) == analysis_flags(study) and len(analysis_flags(study)) == 4
    assert not FlagsStale.objects.filter(study_id=study.pk).exists()


@pytest.mark.django_db
def test_a_refresh_reads_the_rules_as_stored_not_as_the_callers_copy_says():
    study = rating_study_build(conditions=1, prompts=3, items_per_participant=3, exclusion_rules=EVERY_RULE)
    responses = list(study.conditions.get().responses.all())
    someone = ParticipantFactory(
        study=study, condition=responses[0].condition, status=Participant.Status.COMPLETED
    )
    rated(someone, responses, values=(1, 2, 3), ms=300)
    stale_copy = Study.objects.get(pk=study.pk)
    Study.objects.filter(pk=study.pk).update(exclusion_rules={**EVERY_RULE, "too_fast": None})
    assert flagged_by_rules(stale_copy) == {}
    study.refresh_from_db()
    assert analysis_flags(study) == {}


@pytest.mark.django_db
def test_a_refresh_computes_only_the_participants_who_changed():
    study = rating_study_build(conditions=1, prompts=4, items_per_participant=4, exclusion_rules=EVERY_RULE)
    responses = list(study.conditions.get().responses.all())
    people = [
        ParticipantFactory(study=study, condition=responses[0].condition, status=Participant.Status.COMPLETED)
        for _ in range(6)
    ]
    for someone in people:
        rated(someone, responses, values=(1, 2, 3, 1), ms=4000)
    assert flags_refresh(study) == 6
    assert flags_refresh(study) == 0
    Rating.objects.filter(assignment__participant=people[2]).update(response_time_ms=100)
    Participant.objects.filter(pk=people[4].pk).update(last_seen_at=people[4].started_at)  # read by no rule
    assert flags_refresh(study) == 1
    assert set(flagged_by_rules(study)) == {people[2].pk}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_flags_stay_equal_to_the_analysis_while_answers_race_the_page(requires_postgres):
    # Ten participants answer (fast, slow, all the same, some leaving halfway) on their own connections while
    # three readers refresh the stored flags again and again; afterwards one more refresh must give exactly
    # the analysis's flags: a mark lost to a race (a refresh deleting a mark renewed after it read the rows)
    # would leave a participant's flags stale.
    items = 6
    study = rating_study_build(
        conditions=2,
        prompts=12,
        items_per_participant=items,
        quota_per_condition=100,
        exclusion_rules=EVERY_RULE,
    )
    people = [participant_enroll(study=study, external_id=f"R{i:02d}") for i in range(10)]
    Participant.objects.filter(study=study).update(step=Participant.Step.ITEMS)

    def answer(i: int) -> None:
        someone = Participant.objects.get(pk=people[i].pk)
        for position in range(items):
            if i % 5 == 4 and position == items // 2:
                participant_return(participant=someone)
                return
            value = 3 if i % 3 == 0 else 1 + (position + i) % 3
            rating_submit(
                participant=someone, position=position, value=value, response_time_ms=200 + 700 * (i % 4)
            )

    refreshes, errors = writers_against_readers(
        answer, len(people), lambda: flags_refresh(Study.objects.get(pk=study.pk))
    )

    assert not errors, errors
    assert sum(refreshes) > 0  # the readers did compute while the answers went in
    assert Rating.objects.filter(assignment__participant__study=study).count() == 8 * items + 2 * (items // 2)
    expected = analysis_flags(study)
    assert flagged_by_rules(study) == expected
    assert {word for rules in expected.values() for word in rules} >= {
        "too fast",
        "straight-lining",
        "not finished",
    }
