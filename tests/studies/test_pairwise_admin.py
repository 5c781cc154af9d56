"""The pairwise kind's admin pieces and status, on a pairwise study's pages only."""

import html
import re

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from studies.kinds import kind_of
from studies.models import Study
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


def test_a_pairwise_study_is_set_up_welcomed_and_preregistered_in_pairwise_words(staff_client):
    study = pairwise_study_build(known_answers=(2, 4), state="draft")
    page = staff_client.get(reverse("admin:studies_study_change", args=[study.pk])).content.decode()
    assert "Reply A" in page and "Reply B" in page and "The more empathetic reply" in page
    assert "Both are inadequate" in page and "Its rating" not in page
    assert 'name="target_ratings_per_response"' not in page
    checks = staff_client.get(f"/admin/studies/study/{study.pk}/setup/checks/").content.decode()
    assert "2 known-answer pairs; the exclusion rules" in checks and "#pair_attention_checks-group" in checks
    # Worked examples are stored in the kind's form and shown with the instructions in its words.
    examples = [{"emotion": "sad", "situation": "S", "speaker_utterance": "U", "reply_a": "Kind words.",
                 "reply_b": "Whatever.", "choice": "A", "explanation": "A listens."}]  # fmt: skip
    study.worked_examples = examples
    study.full_clean()
    study.save()
    study.worked_examples = [{**examples[0], "choice": "Good"}]
    with pytest.raises(ValidationError, match="the more empathetic reply"):
        study.full_clean()
    prereg = staff_client.get(reverse("admin:studies_study_prereg", args=[study.pk])).content.decode()
    text = html.unescape(re.sub(r"<[^>]+>", " ", prereg))
    assert "Primary test: Bradley–Terry" in " ".join(text.split())
    assert "Known-answer pairs (the attention checks): 2" in text
    assert "about the same" in text and "both are inadequate" in text
    for rating_word in ("Scale:", "Good = 3", "ratings per response", "chi-square", "χ²"):
        assert rating_word not in text
    Study.objects.filter(pk=study.pk).update(state=Study.State.LIVE, platform=Study.Platform.NONE)
    welcome = Client().get(f"/s/{study.slug}/").content.decode()
    assert "each with two replies, and say which reply is more empathetic" in welcome
    assert "say how empathetic one of the answers is" not in welcome
