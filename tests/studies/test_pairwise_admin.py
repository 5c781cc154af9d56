"""The pairwise kind's admin pieces and status, on a pairwise study's pages only."""

import pytest
from django.urls import reverse

from studies.kinds import kind_of
from studies.participants import participant_enroll
from tests.factories import StudyFactory, pairwise_study_build

pytestmark = pytest.mark.django_db


def test_a_pairwise_study_shows_its_settings_and_known_answer_pairs_in_the_admin(staff_client):
    study = pairwise_study_build(known_answers=(2,), state="draft")
    page = staff_client.get(reverse("admin:studies_study_change", args=[study.pk])).content.decode()
    assert "pairwise_settings-0-focal_design" in page and "pair_attention_checks-0-poor_reply" in page
    assert 'name="scale_question"' not in page and 'name="worked_examples_0"' in page
    rating = StudyFactory()
    page = staff_client.get(reverse("admin:studies_study_change", args=[rating.pk])).content.decode()
    assert "pairwise_settings" not in page and "pair_attention_checks" not in page


def test_the_live_status_counts_each_conditions_replies_and_votes():
    study = pairwise_study_build(conditions=3, prompts=6, items_per_participant=3, quota_per_condition=50)
    participant_enroll(study=study, external_id="P1")
    kind = kind_of(study)
    per = kind.status_counts(study, list(study.conditions.all()))
    assert all(row["responses"] == 6 and row["votes"] == 0 for row in per.values())
    assert "3 pairs per participant" in kind.status_summary(study, {"prompts": 6})
