"""The picture check (cognitive trap): one page per participant placed by their seed, its picture holding no
answer in the page's text, its answer scored (passed, failed, skipped) and never counted as a rating."""

import json
import re

import pytest
from django.test import Client

from kinds.rating.models import Rating
from studies.authenticity import NOT_LOADED, PICTURE_SKIPPED, picture_answer, score_compute
from studies.models import Assignment, Participant, ParticipantAuthenticity
from studies.selectors import study_status
from tests.concurrency import race
from tests.factories import rating_study_build
from tests.ratings.helpers import consent_and_instructions, current_position, enter, step_url

pytestmark = pytest.mark.django_db

MOUSE = {"t": 12000, "fi": 400, "pm": 80, "pd": 1, "cl": 1, "c": {"au": [], "sw": 1280, "sh": 800}}
JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture
def study():
    return rating_study_build(conditions=1, prompts=8, items_per_participant=5, trap_picture=True)


def _on_items(client, study, pid="PID1") -> Participant:
    enter(client, study, pid)
    consent_and_instructions(client, study)
    return Participant.objects.get(external_id=pid)


def _picture_page(participant) -> Assignment:
    return Assignment.objects.get(participant=participant, kind=Assignment.Kind.PICTURE)


def _answer_all(client, study, participant, picture_value, sig=None):
    """Answers every page as a plain post (the picture page with `picture_value`: a value, or "skip")."""
    while (position := current_position(client, study)) is not None:
        data = {"step": "items", "position": position}
        if position == _picture_page(participant).position:
            data.update({"picture": "skip"} if picture_value == "skip" else {"value": picture_value})
        else:
            data["value"] = 2
        if sig is not None:
            data["sig"] = json.dumps(sig)
        assert client.post(step_url(study), data).status_code == 302


def _asked(study, participant) -> int:
    return int(picture_answer(study=study, participant_id=participant.pk, options=study.scale)["value"])


def test_each_participant_gets_one_picture_page_among_their_items_where_their_seed_puts_it(study):
    positions = []
    for n in range(8):
        participant = _on_items(Client(), study, f"P{n}")
        kinds = list(participant.assignments.order_by("position").values_list("kind", flat=True))
        assert kinds.count("picture") == 1 and kinds.count("response") == 5 and len(kinds) == 6
        assert kinds[0] == "response"  # never the first page
        positions.append(kinds.index("picture"))
    assert len(set(positions)) > 1  # placed by each participant's seed, not at one fixed place


def test_without_the_setting_there_is_no_picture_page():
    study = rating_study_build(conditions=1, prompts=8, items_per_participant=5)
    participant = _on_items(Client(), study)
    assert not participant.assignments.filter(kind=Assignment.Kind.PICTURE).exists()


def test_the_picture_page_text_says_nothing_of_the_answer(study):
    client = Client()
    participant = _on_items(client, study)
    client.post(step_url(study), {"step": "items", "position": 0, "value": 2})
    while current_position(client, study) != _picture_page(participant).position:
        client.post(
            step_url(study), {"step": "items", "position": current_position(client, study), "value": 2}
        )
    html = client.get(step_url(study)).content.decode()
    assert (
        "<svg" in html and "Answer as the picture asks." in html and "I can&rsquo;t see the picture" in html
    )
    svg = html[html.index("<svg") : html.index("</svg>")]
    assert "<text" not in svg and "<title" not in svg and "<desc" not in svg
    label = picture_answer(study=study, participant_id=participant.pk, options=study.scale)["label"]
    text = re.sub(r"<[^>]+>", " ", html)
    assert "check:" not in text.lower() and "choose" not in re.sub(r"choose &ldquo;I can", "", svg + text)
    # The label appears only as its answer button, as on every item page.
    assert text.count(label) == html.count(f'<span class="scale-label">{label}</span>')


@pytest.mark.parametrize("answer, outcome", [("right", "passed"), ("wrong", "failed"), ("skip", "neither")])
def test_the_picture_answer_is_scored_and_only_a_wrong_one_costs(pages_seconds_apart, study, answer, outcome):
    client = Client(HTTP_USER_AGENT="Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/120.0")
    participant = _on_items(client, study)
    asked = _asked(study, participant)
    value = {"right": asked, "wrong": next(v for v in study.scale_values if v != asked), "skip": "skip"}[
        answer
    ]
    _answer_all(client, study, participant, value, sig=MOUSE)
    participant.refresh_from_db()
    assert participant.status == Participant.Status.COMPLETED
    row = ParticipantAuthenticity.objects.get(participant=participant)
    assert row.picture == outcome
    if outcome == "failed":
        assert (row.score, row.flagged) == (60, False)  # strong, but alone never a flag
        assert row.reasons == ["picture check answered otherwise than the picture (or its sound) asked (-40)"]
    elif outcome == "neither":  # neither the picture nor its sound: a light reason, never a flag alone
        assert (row.score, row.flagged) == (80, False)
    else:
        assert (row.score, row.reasons) == (100, [])
    stored = Rating.objects.get(assignment__kind=Assignment.Kind.PICTURE, assignment__participant=participant)
    assert stored.value == (PICTURE_SKIPPED if answer == "skip" else value)


def test_a_wrong_picture_answer_with_another_reason_flags():
    fast = {"t": 600, "pm": 3, "pd": 1, "cl": 1}
    pages = {f"items:{i}": fast for i in range(5)}
    assert not score_compute(client={"au": []}, pages=pages, picture="").flagged  # fast alone: 70
    assert score_compute(client={"au": []}, pages=pages, picture="failed").flagged  # and the picture: 30
    assert not score_compute(client={"au": []}, pages=pages, picture="skipped").flagged  # before the sound


def test_i_cannot_see_the_picture_is_refused_on_an_ordinary_item(study):
    client = Client()
    _on_items(client, study)
    response = client.post(step_url(study), {"step": "items", "position": 0, "picture": "skip"})
    assert response.status_code == 400
    assert not Rating.objects.exists()


def test_the_picture_answer_is_never_a_rating(study):
    from kinds.rating.frame import rating_rows_frame
    from kinds.rating.rating_totals import ratings_per_response

    client = Client()
    participant = _on_items(client, study)
    _answer_all(client, study, participant, _asked(study, participant))
    assert Rating.objects.filter(assignment__participant=participant).count() == 6
    assert len(rating_rows_frame(study=study)) == 5
    assert study_status(study=study)["totals"]["ratings"] == 5
    assert sum(n for _, n in ratings_per_response(study).values()) == 5


def test_in_place_answers_send_the_browser_to_the_picture_page(study):
    client = Client()
    participant = _on_items(client, study)
    picture_at = _picture_page(participant).position
    for position in range(picture_at):
        reply = client.post(step_url(study), {"step": "items", "position": position, "value": 2}, **JSON)
    assert reply.json() == {"next": step_url(study)}
    assert current_position(client, study) == picture_at


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_picture_answer_sent_twice_at_once_is_stored_and_scored_once(requires_postgres, study):
    from kinds.rating.services import rating_submit

    client = Client()
    participant = _on_items(client, study)
    picture_at = _picture_page(participant).position
    for position in range(picture_at):
        rating_submit(participant=participant, position=position, value=2)
    wrong = next(v for v in study.scale_values if v != _asked(study, participant))

    def send(i):
        return rating_submit(
            participant=Participant.objects.get(pk=participant.pk), position=picture_at, value=wrong
        ).created

    results, errors = race(send, 8)
    assert not errors and sorted(results.values()) == [False] * 7 + [True]
    assert (
        Rating.objects.filter(assignment__position=picture_at, assignment__participant=participant).count()
        == 1
    )
    row = ParticipantAuthenticity.objects.get(participant=participant)
    assert row.picture == "failed" and row.reasons == [
        "no signals: the browser sent none (JavaScript off, an old browser, or forms posted without the page)",
        "picture check answered otherwise than the picture (or its sound) asked (-40)",
        f"{NOT_LOADED[1]} (-40)",  # posted by the test's client, which fetches no stylesheet
    ]
