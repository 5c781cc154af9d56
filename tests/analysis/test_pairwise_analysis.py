"""A pairwise study analysed through its kind's entry: `manage.py analyze <slug> --out DIR` writes bt_scores.csv,
the analysts' page shows the tables and figures and offers the files, and the adaptive phase of the schedule
deals by the current strengths."""

import csv
import random
from collections import Counter

import pytest
from django.core.management import call_command

from kinds.pairwise.kind import pair_live_counts
from kinds.pairwise.models import PairItem, PairwiseSettings
from kinds.pairwise.pages import pair_answer_submit, pair_show
from studies.models import Condition
from studies.participants import participant_advance, participant_enroll
from tests.factories import pairwise_study_build, rating_study_build

pytestmark = pytest.mark.django_db
# How likely each condition's reply is preferred, against a tie: arm2 best, arm0 (the baseline) worst.
QUALITY = {"arm0": 1.0, "arm1": 2.0, "arm2": 4.0}


def votes(study, n: int, *, seed: int = 1, quality: dict | None = None):
    """`n` participants answer all their pairs, preferring the better condition (by `quality`, default `QUALITY`)
    most of the time."""
    quality = quality or QUALITY
    rng = random.Random(seed)
    for i in range(n):
        participant = participant_enroll(study=study, external_id=f"R{seed}-{i}")
        participant_advance(participant=participant, from_step="consent")
        participant_advance(participant=participant, from_step="instructions")
        while (shown := pair_show(participant=participant)) is not None:
            item = PairItem.objects.select_related("left__condition", "right__condition").get(
                participant=participant, position=shown.position
            )
            if item.is_check:  # a known-answer pair: the good reply
                choice = "left" if item.good_on_left else "right"
                pair_answer_submit(participant=participant, position=shown.position, choice=choice)
                continue
            left, right = quality[item.left.condition.name], quality[item.right.condition.name]
            draw = rng.random() * (left + right + 1)
            choice = "left" if draw < left else "right" if draw < left + right else "tie"
            pair_answer_submit(participant=participant, position=shown.position, choice=choice)


@pytest.fixture
def study():
    study = pairwise_study_build(conditions=3, prompts=12, items_per_participant=6, quota_per_condition=100)
    votes(study, 24)
    return study


def test_analyze_writes_bt_scores_with_the_baseline_at_zero_and_the_better_conditions_above(study, tmp_path):
    call_command("analyze", study.slug, "--out", str(tmp_path), "--bootstrap", "60")
    with open(tmp_path / "bt_scores.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:4] == ["condition", "strength", "ci_low", "ci_high"]
    scores = {row["condition"]: row for row in rows}
    assert float(scores["arm0"]["strength"]) == 0.0
    assert float(scores["arm2"]["strength"]) > float(scores["arm1"]["strength"]) > 0
    for row in rows:
        assert float(row["ci_low"]) <= float(row["strength"]) <= float(row["ci_high"])
    assert (tmp_path / "report.html").exists() and (tmp_path / "win_matrix.csv").exists()
    assert (tmp_path / "design.json").exists()


def test_the_analysts_page_shows_the_tables_and_figures_and_offers_the_files(
    study, client, django_user_model
):
    staff = django_user_model.objects.create_user(username="analyst", password=None, is_staff=True)
    client.force_login(staff)
    page = client.get(f"/analysis/{study.slug}/pairwise/")
    text = page.content.decode()
    assert page.status_code == 200
    for name in ("bt_scores.csv", "win_matrix.csv", "position_bias.csv", "win_rates.csv"):
        assert '<h2 id="table-' in text and name in text
    assert 'alt="Each condition' in text
    download = client.get(f"/analysis/{study.slug}/pairwise/bt_scores.csv")
    assert download.status_code == 200 and download.content.startswith(b"condition,strength,ci_low,ci_high")
    assert client.get(f"/analysis/{study.slug}/pairwise/bt_strengths.png")["Content-Type"] == "image/png"
    assert client.get(f"/analysis/{study.slug}/pairwise/nothing.csv").status_code == 404
    assert client.get(f"/analysis/{study.slug}/").status_code == 302  # the dashboard sends analysts here


def test_after_the_warm_up_the_adaptive_phase_deals_the_closest_pair_most_within_its_cap():
    # arm1 and arm2 nearly alike, arm0 far below both: the closest pair is arm1–arm2 whatever pairs were dealt.
    # (With QUALITY's 1 : 2 : 4, arm0–arm1 and arm1–arm2 are equally far apart, and the votes decide which is
    # closest: when it is arm0–arm1, the other two pairs are already above their shares and get no new pages.)
    study = pairwise_study_build(conditions=3, prompts=12, items_per_participant=6, quota_per_condition=100)
    votes(study, 24, quality={"arm0": 1.0, "arm1": 4.0, "arm2": 4.5})
    PairwiseSettings.objects.filter(study=study).update(adaptive_after=50, adaptive_max_share=0.6)
    before = Counter()
    for (_prompt, left, right), n in pair_live_counts(study=study).items():
        before[frozenset((left, right))] += n
    for i in range(10):
        participant_enroll(study=study, external_id=f"NEW{i}")
    dealt = Counter()
    for (_prompt, left, right), n in pair_live_counts(study=study).items():
        dealt[frozenset((left, right))] += n
    new = {pair: dealt[pair] - before[pair] for pair in dealt}
    ids = dict(Condition.objects.filter(study=study).values_list("name", "pk"))
    closest = frozenset((ids["arm1"], ids["arm2"]))
    farthest = frozenset((ids["arm0"], ids["arm2"]))
    assert new[closest] > new[farthest]
    assert dealt[closest] <= 0.6 * sum(dealt.values()) + 1  # the cap holds over all the pairs dealt


def test_the_api_serves_the_same_files_to_analysts_only(study, client, analyst):
    url = f"/api/studies/{study.slug}/pairwise/bt_scores.csv"
    assert client.get(url).status_code in (401, 403)
    client.force_login(analyst)
    response = client.get(url)
    assert response.status_code == 200 and response.content.startswith(b"condition,strength,ci_low,ci_high")
    assert client.get(f"/api/studies/{study.slug}/pairwise/summary.json").json()["baseline"] == "arm0"
    rating = rating_study_build()
    assert client.get(f"/api/studies/{rating.slug}/pairwise/bt_scores.csv").status_code == 404
