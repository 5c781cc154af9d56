"""A pairwise participant through Django's test client: the plain form posts (no JavaScript), the background
posts of participant.js (one request per answer, the next pair in the reply), exactly-once answers and the
known-answer pairs."""

import re

import pytest

from kinds.pairwise.models import PairItem
from studies.models import Participant
from tests.factories import pairwise_study_build
from tests.ratings.helpers import POSITION, consent_and_instructions, enter, step_url

pytestmark = pytest.mark.django_db
JSON = {"HTTP_ACCEPT": "application/json"}
REPLIES = re.compile(r"data-reply-a>([^<]*)</p>.*?data-reply-b>([^<]*)</p>", re.S)


@pytest.fixture
def study():
    return pairwise_study_build(conditions=3, prompts=6, items_per_participant=3, known_answers=(1,))


def page_of(client, study) -> str:
    return client.get(step_url(study)).content.decode()


def position_of(page: str) -> int:
    return int(POSITION.search(page).group(1))


def answer(client, study, position, choice, **extra):
    return client.post(step_url(study), {"step": "pairs", "position": position, "choice": choice, **extra})


def good_side(page: str) -> str:
    """The side of the fuller reply: the known-answer pair's good one."""
    a, b = REPLIES.search(page).groups()
    return "left" if len(a) >= len(b) else "right"


def test_without_javascript_each_pair_is_a_plain_post_and_the_last_one_completes(client, study):
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    for number in range(1, 5):
        page = page_of(client, study)
        assert f"Pair {number} of 4" in page
        assert "Reply A" in page and "Reply B" in page and "Both replies are inadequate" in page
        response = answer(client, study, position_of(page), good_side(page), both_inadequate="1")
        assert response.status_code == 302 and response["Location"] == step_url(study)
    assert "C0MPLETE" in page_of(client, study)
    participant = Participant.objects.get(external_id="PID1")
    assert participant.status == Participant.Status.COMPLETED and not participant.flagged_for_exclusion
    answered = participant.pair_items.filter(known_answer__isnull=True)
    assert answered.count() == 3 and all(p.choice and p.both_inadequate for p in answered)
    assert all(p.response_time_ms is not None and p.answered_at for p in answered)


def test_with_javascript_each_answer_is_one_request_whose_reply_shows_the_next_pair(client, study):
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    page = page_of(client, study)
    for number in range(2, 5):
        response = client.post(
            step_url(study),
            {"step": "pairs", "position": position_of(page), "choice": good_side(page)},
            **JSON,
        )
        assert response.status_code == 200 and response["Content-Type"] == "application/json"
        page = response.json()["page"]
        assert f"Pair {number} of 4" in page  # the next pair came with the answer: no second request
    response = client.post(
        step_url(study), {"step": "pairs", "position": position_of(page), "choice": "tie"}, **JSON
    )
    assert "C0MPLETE" in response.json()["page"]
    assert PairItem.objects.filter(participant__external_id="PID1", answered_at__isnull=False).count() == 4


def test_an_answer_sent_twice_is_stored_once_and_a_later_pair_cannot_be_answered_ahead(client, study):
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    first = position_of(page_of(client, study))
    later = PairItem.objects.filter(participant__external_id="PID1").exclude(position=first).first()
    answer(client, study, later.position, "left")  # ahead of the current pair: nothing stored
    assert not PairItem.objects.filter(pk=later.pk, answered_at__isnull=False).exists()
    answer(client, study, first, "right")
    answer(client, study, first, "left")  # the same page again (a retry, a second tab)
    stored = PairItem.objects.get(participant__external_id="PID1", position=first)
    assert stored.choice == "right"
    assert PairItem.objects.filter(participant__external_id="PID1", answered_at__isnull=False).count() == 1


def test_an_answer_that_is_not_one_of_the_three_is_refused_with_nothing_stored(client, study):
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    response = answer(client, study, position_of(page_of(client, study)), "both")
    assert response.status_code == 400
    assert not PairItem.objects.filter(participant__external_id="PID1", answered_at__isnull=False).exists()


def test_choosing_the_poor_reply_of_a_known_answer_pair_fails_the_check_like_the_rating_kind(client, study):
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    for _ in range(4):
        page = page_of(client, study)
        position = position_of(page)
        item = PairItem.objects.get(participant__external_id="PID1", position=position)
        if item.is_check:  # disguised: the page shows two replies like any other pair
            assert "Whatever." in page and "attention" not in page.lower()
            choice = "right" if item.good_on_left else "left"
        else:
            choice = "left"
        answer(client, study, position, choice)
    participant = Participant.objects.get(external_id="PID1")
    assert participant.attention_failures == 1 and participant.flagged_for_exclusion
    assert participant.exclusion_reasons == ["attention checks failed: 1 of 1"]
    assert participant.completion_code == "FAILEDCK"


def test_the_hidden_instruction_is_on_each_pair_and_following_it_flags_the_participant(client):
    from studies.authenticity import TRAP_FIELD, trap_word

    study = pairwise_study_build(
        conditions=3, prompts=6, items_per_participant=3, trap_hidden_instruction=True
    )
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    page = page_of(client, study)
    assert trap_word(study) in page and f'name="{TRAP_FIELD}"' in page and 'aria-hidden="true"' in page
    answer(client, study, position_of(page), "left", **{TRAP_FIELD: trap_word(study)})
    participant = Participant.objects.get(external_id="PID1")
    assert participant.pair_items.filter(choice="left").count() == 1  # the answer stands: nothing is refused
    row = participant.authenticity
    assert row.flagged and any(reason.startswith("hidden instruction followed") for reason in row.reasons)
