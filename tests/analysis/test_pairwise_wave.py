"""A follow-up wave of a pairwise study: a new model compared with the stored conditions, the parent's comparisons
kept, and the drift test on the parent's pairs asked again."""

import csv
import io
from collections import Counter

import pytest
from django.core.management import call_command

from kinds.pairwise.kind import pair_live_counts
from studies.models import Condition, Response
from studies.participants import participant_enroll
from studies.services import study_launch
from studies.waves import study_extend
from tests.analysis.test_pairwise_analysis import QUALITY, votes
from tests.factories import pairwise_study_build

pytestmark = pytest.mark.django_db


@pytest.fixture
def wave():
    parent = pairwise_study_build(
        conditions=3,
        prompts=12,
        items_per_participant=6,
        quota_per_condition=100,
        state="draft",
        known_answers=(3,),
    )
    parent = study_launch(study=parent)
    votes(parent, 20, seed=1)
    wave = study_extend(parent=parent, new_slug="pairs-wave", conditions=["arm9"], rerate_share=0.25)
    new = Condition.objects.get(study=wave, name="arm9")
    Response.objects.bulk_create(
        [
            Response(prompt=prompt, condition=new, text=f"a new model's reply {prompt.pk}")
            for prompt in wave.prompts.all()
        ]
    )
    return study_launch(study=wave)


def test_a_wave_keeps_the_stored_conditions_and_deals_the_new_one_against_them(wave):
    assert list(wave.pair_attention_checks.values_list("poor_reply", "after_item")) == [("Whatever.", 3)]
    names = set(wave.conditions.values_list("name", flat=True))
    assert names == {"arm0", "arm1", "arm2", "arm9"}
    assert wave.conditions.get(is_baseline=True).name == "arm0"
    for i in range(12):
        participant_enroll(study=wave, external_id=f"W{i}")
    by_name = dict(Condition.objects.filter(study=wave).values_list("pk", "name"))
    dealt = Counter()
    for (_prompt, left, right), n in pair_live_counts(study=wave).items():
        dealt[frozenset((by_name[left], by_name[right]))] += n
    new = sum(n for pair, n in dealt.items() if "arm9" in pair)
    again = sum(n for pair, n in dealt.items() if "arm9" not in pair)
    assert new + again == 12 * 6  # the known-answer pairs are not condition pairs
    assert again == pytest.approx(
        0.25 * (new + again), abs=2
    )  # the parent's pairs re-asked at the wave's share
    assert {pair for pair in dealt if "arm9" in pair} == {
        frozenset(("arm9", a)) for a in ("arm0", "arm1", "arm2")
    }


def test_the_waves_analysis_ranks_the_whole_family_and_tests_drift_on_the_pairs_asked_again(wave, tmp_path):
    QUALITY["arm9"] = 8.0  # far above arm1 (2.0): the order holds whatever pairs the seeds deal
    try:
        votes(wave, 16, seed=2)
    finally:
        del QUALITY["arm9"]
    call_command("analyze", wave.slug, "--out", str(tmp_path), "--bootstrap", "40", stdout=io.StringIO())
    with open(tmp_path / "bt_scores.csv") as f:
        scores = {row["condition"]: float(row["strength"]) for row in csv.DictReader(f)}
    assert set(scores) == {"arm0", "arm1", "arm2", "arm9"} and scores["arm0"] == 0.0
    assert scores["arm9"] > scores["arm1"] > 0
    with open(tmp_path / "drift.csv") as f:
        (drift,) = list(csv.DictReader(f))
    assert int(drift["votes_original"]) > 0 and int(drift["votes_again"]) > 0
    assert drift["p"] != ""  # the parent's pairs were asked again on the same prompts: the test ran
