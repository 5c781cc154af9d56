"""Two conditions' (near-)identical replies to one prompt: flagged at review in every kind, and never dealt as a
pair in a pairwise study until the researcher decides (studies/reply_review.py)."""

import pytest
from django.urls import reverse

from kinds.pairwise.demo import PAIRWISE_CORPUS
from kinds.pairwise.models import PairItem
from studies.importers import corpus_import
from studies.kinds import kind_of
from studies.models import Response
from studies.participants import participant_enroll
from studies.reply_review import SAME_AS_OTHER_CONDITION, same_replies_flag, undecided_same_pairs
from studies.services import study_launch_problems
from tests.factories import pairwise_study_build, rating_study_build

pytestmark = pytest.mark.django_db


def _flagged(study):
    return {
        (r.prompt.dialogue_id, r.condition.name)
        for r in Response.objects.filter(condition__study=study).select_related("prompt", "condition")
        if SAME_AS_OTHER_CONDITION in r.review_flags
    }


def test_the_pairwise_demo_corpus_flags_its_identical_and_its_near_identical_replies_and_nothing_else():
    study = corpus_import(study_slug="same-replies", data=PAIRWISE_CORPUS.read_bytes()).study
    assert _flagged(study) == {
        ("hit:10836_conv:21673", "chatgpt"),
        ("hit:10836_conv:21673", "chatgpt_empathy"),  # the same text
        ("hit:542_conv:1084", "chatgpt"),
        ("hit:542_conv:1084", "chatgpt_empathy"),  # "sorry to hear that you're" / "sorry that you're"
    }
    assert set(Response.objects.filter(condition__study=study).values_list("review", flat=True)) == {"ok"}
    assert same_replies_flag(study=study) == 0  # flagged once


def _same_text(study, prompt, names=("arm1", "arm2")):
    Response.objects.filter(prompt=prompt, condition__name__in=names).update(
        text="I am so sorry. That is hard."
    )
    assert same_replies_flag(study=study) == 2


def test_near_identical_replies_are_never_dealt_as_a_pair_until_one_is_approved(staff_client):
    study = pairwise_study_build(conditions=3, prompts=4, items_per_participant=3, quota_per_condition=100)
    prompt = study.prompts.order_by("pk").first()
    _same_text(study, prompt)
    arm1, arm2 = (study.conditions.get(name=n).pk for n in ("arm1", "arm2"))
    assert undecided_same_pairs(study) == {(prompt.pk, min(arm1, arm2), max(arm1, arm2))}
    assert "1 pair(s) of near-identical replies" in kind_of(study).coverage_problems(study, [])[0]
    for i in range(24):
        participant_enroll(study=study, external_id=f"P{i}")

    def same_pairs():
        return PairItem.objects.filter(
            prompt=prompt, left__condition_id__in=(arm1, arm2), right__condition_id__in=(arm1, arm2)
        ).count()

    assert same_pairs() == 0
    assert PairItem.objects.filter(prompt=prompt).exists()  # its other pairs are dealt as usual

    reply = Response.objects.get(prompt=prompt, condition_id=arm1)
    staff_client.post(
        reverse("admin:studies_response_changelist"),
        {"action": "approve_selected", "_selected_action": [reply.pk]},
    )
    reply.refresh_from_db()
    assert reply.review == Response.Review.APPROVED  # the researcher's decision
    assert undecided_same_pairs(study) == set()
    for i in range(24, 60):
        participant_enroll(study=study, external_id=f"P{i}")
    assert same_pairs() > 0


def test_a_rating_study_flags_them_for_review_without_holding_anything_back():
    study = rating_study_build(conditions=2, prompts=4, items_per_participant=2, state="draft")
    prompt = study.prompts.order_by("pk").first()
    _same_text(study, prompt, names=("arm0", "arm1"))
    assert {r.review for r in Response.objects.filter(prompt=prompt)} == {Response.Review.OK}
    assert not any("flagged" in str(p) for p in study_launch_problems(study=study))
