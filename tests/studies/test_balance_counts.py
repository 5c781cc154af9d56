"""The balance's running totals (studies/balance_counts.py) always equal the rule counted from the rows
(studies/balancing.py), whatever arrives, returns, is screened out, goes stale or is released at once, on
separate PostgreSQL connections; and they are what enrolment deals by."""

from datetime import timedelta

import pytest
from django.utils import timezone

from kinds.questionnaire.kind import situation_live_counts
from kinds.rating.kind import eligible_responses, response_live_counts
from studies import balance_counts
from studies.balancing import condition_counts
from studies.models import Assignment, BalanceCount, Participant, Situation, Study, StudySituation
from studies.participants import (
    participant_enroll,
    participant_return,
    participant_screen_out,
    participants_release_stale,
)
from tests.concurrency import race
from tests.factories import SituationFactory, StudyFactory, rating_study_build

pytestmark = pytest.mark.django_db


def _assert_totals_equal_the_rule(study, now=None):
    now = now or timezone.now()
    held, _ = balance_counts.holding(study, now)
    rule = condition_counts(study=study, now=now)
    assert {c: held.get(c, 0) for c in rule} == rule
    for condition in study.conditions.all():
        pages = balance_counts.live_pages(study, now, Assignment.Kind.RESPONSE, eligible_responses(condition))
        assert pages == response_live_counts(condition=condition, now=now), condition.name


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_under_a_race_of_arrivals_returns_screen_outs_and_releases_the_totals_equal_the_rule(
    requires_postgres,
):
    study = rating_study_build(conditions=3, prompts=20, items_per_participant=3, quota_per_condition=100)
    for i in range(12):
        participant_enroll(study=study, external_id=f"OLD{i}")
    Participant.objects.filter(external_id__in=[f"OLD{i}" for i in range(6)]).update(
        last_seen_at=timezone.now() - timedelta(days=1)
    )
    _assert_totals_equal_the_rule(study)  # six lapsed, not yet released: subtracted, not forgotten

    def act(i):
        if i % 5 == 0:
            return participants_release_stale()
        if i % 5 == 1 and i // 5 + 6 < 12:
            return participant_return(participant=Participant.objects.get(external_id=f"OLD{i // 5 + 6}"))
        participant = participant_enroll(study=study, external_id=f"NEW{i:03d}")
        if i % 5 == 2:
            participant_screen_out(participant=participant)
        return participant.pk

    results, errors = race(act, 40)
    assert not errors, errors
    assert Participant.objects.filter(status=Participant.Status.SCREENED_OUT).count() == 8
    assert Participant.objects.filter(status=Participant.Status.RETURNED).count() == 6
    _assert_totals_equal_the_rule(study)
    _assert_totals_equal_the_rule(study, now=timezone.now() + timedelta(days=2))  # everyone lapsed
    before = set(BalanceCount.objects.filter(study=study).values_list("scope", "key", "count"))
    balance_counts.counts_rebuild(study)
    assert set(
        BalanceCount.objects.filter(study=study, count__gt=0).values_list("scope", "key", "count")
    ) == {row for row in before if row[2]}


def test_previews_count_nowhere():
    study = rating_study_build(conditions=2, prompts=6, items_per_participant=3)
    participant_enroll(study=study, external_id="staff", is_preview=True)
    assert not BalanceCount.objects.filter(study=study).exists()
    _assert_totals_equal_the_rule(study)


def test_deleting_participants_in_the_admin_recounts(admin_client):
    study = rating_study_build(conditions=2, prompts=6, items_per_participant=3)
    gone = participant_enroll(study=study, external_id="gone")
    participant_enroll(study=study, external_id="stays")
    admin_client.post(f"/admin/studies/participant/{gone.pk}/delete/", {"post": "yes"})
    assert not Participant.objects.filter(pk=gone.pk).exists()
    _assert_totals_equal_the_rule(study)
    assert sum(balance_counts.holding(study, timezone.now())[0].values()) == 1


def test_a_planted_drift_is_what_the_check_catches():
    study = rating_study_build(conditions=2, prompts=6, items_per_participant=3)
    participant = participant_enroll(study=study, external_id="one")
    Participant.objects.filter(pk=participant.pk).update(
        status=Participant.Status.RETURNED
    )  # behind its back
    with pytest.raises(AssertionError):
        _assert_totals_equal_the_rule(study)
    balance_counts.counts_rebuild(study)
    Assignment.objects.filter(participant=participant, answered_at__isnull=True).delete()
    balance_counts.counts_rebuild(study)
    _assert_totals_equal_the_rule(study)


def test_the_questionnaire_deals_situations_by_the_totals():
    study = StudyFactory(kind=Study.Kind.QUESTIONNAIRE, state=Study.State.LIVE, quota_per_condition=100)
    study.conditions.create(name="human")
    for _ in range(3):
        StudySituation.objects.create(study=study, situation=SituationFactory())
    for i in range(5):
        participant_enroll(study=study, external_id=f"Q{i}")
    now = timezone.now()
    situations = Situation.objects.filter(study_situations__study=study)
    totals = balance_counts.live_pages(study, now, Assignment.Kind.SITUATION, situations)
    assert totals == situation_live_counts(study=study, now=now)
    assert max(totals.values()) - min(totals.values()) <= 1
