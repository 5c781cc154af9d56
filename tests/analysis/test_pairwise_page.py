"""The pairwise analysts' page says what it found in words: a headline, a warning with the votes it would take
when the intervals are too wide, who was excluded and why, the rating dashboard's baseline and exclusions
switches, readable headings and no column without numbers."""

from __future__ import annotations

import html
import random
import re

import pytest

from kinds.pairwise.models import PairItem
from kinds.pairwise.pages import pair_answer_submit, pair_show
from studies.participants import participant_advance, participant_enroll
from tests.factories import pairwise_study_build

pytestmark = pytest.mark.django_db
QUALITY = {"arm0": 1.0, "arm1": 2.0, "arm2": 4.0}


def rater(study, name: str, *, careless: bool, rng: random.Random) -> None:
    """One participant answers every pair; a careless one picks the poor reply of the known-answer pair."""
    participant = participant_enroll(study=study, external_id=name)
    participant_advance(participant=participant, from_step="consent")
    participant_advance(participant=participant, from_step="instructions")
    while (shown := pair_show(participant=participant)) is not None:
        item = PairItem.objects.select_related("left__condition", "right__condition").get(
            participant=participant, position=shown.position
        )
        if item.is_check:
            good = "left" if item.good_on_left else "right"
            choice = ("right" if good == "left" else "left") if careless else good
        else:
            left, right = QUALITY[item.left.condition.name], QUALITY[item.right.condition.name]
            draw = rng.random() * (left + right + 1)
            choice = "left" if draw < left else "right" if draw < left + right else "tie"
        pair_answer_submit(participant=participant, position=shown.position, choice=choice)


@pytest.fixture
def page(client, django_user_model):
    study = pairwise_study_build(
        conditions=3, prompts=12, items_per_participant=6, quota_per_condition=100, known_answers=(3,)
    )
    rng = random.Random(3)
    for i in range(6):
        rater(study, f"ok{i}", careless=False, rng=rng)
    for i in range(2):
        rater(study, f"careless{i}", careless=True, rng=rng)
    client.force_login(django_user_model.objects.create_user(username="a", password=None, is_staff=True))
    return study, lambda query="": client.get(f"/analysis/{study.slug}/pairwise/{query}")


def _text(response) -> str:
    body = response.content.decode().split("<main>", 1)[-1]
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)))


def test_the_page_says_the_result_the_exclusions_and_how_many_votes_it_would_take(page):
    study, get = page
    response = get()
    page_html, text = response.content.decode(), _text(response)
    assert response.status_code == 200
    assert re.search(r"\d+ votes from 6 raters on \d+ prompts compare 3 conditions against arm0", text)
    assert "arm2 is " in text and "log-strength" in text
    assert "Primary test (as pre-registered): Bradley–Terry" in text
    assert "2 of 8 raters are excluded by the study's declared rules" in text
    assert "2 failed the known-answer pairs" in text
    assert "Too little data to say anything yet" in text and "it would take" in text
    assert re.search(r"arm1: about [\d,]+ pairs against the baseline \(it has \d+\)", text)
    for heading in ("Strengths of the conditions", "Win rates against the baseline", "Raters and exclusions"):
        assert heading in text
    assert not re.search(r"<h2[^>]*>[^<]*\.csv", page_html)  # no file name as a heading
    assert "strength_lc" not in page_html and ">se<" not in page_html
    assert 'name="baseline"' in page_html and 'name="exclusions"' in page_html
    assert "failed the known-answer pairs" in text.split("Raters and exclusions")[1]  # each rater's why


def test_the_switches_change_the_baseline_and_count_every_rater(page):
    study, get = page
    text = _text(get("?baseline=arm1&exclusions=none"))
    assert "votes from 8 raters" in text and "against arm1" in text
    assert "Exclusions are off: the votes of all 8 raters are counted." in text
    assert get("?baseline=nobody").status_code == 404
