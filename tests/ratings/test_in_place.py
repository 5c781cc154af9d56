"""In-place answers: the item form posted in the background (`Accept: application/json`) gets the next item
as JSON, with the same checks and the same exactly-once rules as the plain form post."""

import pytest
from django.test import Client

from kinds.rating.models import Rating, RatingSettings
from studies.models import Assignment, Participant
from tests.concurrency import race
from tests.factories import AttentionCheckFactory, rating_study_build
from tests.ratings.helpers import (
    CSRF_TOKEN,
    POSITION,
    STEP,
    another_tab,
    at_first_item,
    consent_and_instructions,
    current_position,
    enter,
    step_url,
)

JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture
def study():
    return rating_study_build(conditions=1, prompts=6, items_per_participant=3)


def answer(client, study, position, value, **extra):
    return client.post(
        step_url(study), {"step": "items", "position": position, "value": value, **extra}, **JSON
    )


@pytest.mark.django_db
def test_each_answer_gets_the_next_item_as_json_and_the_last_one_the_completion_page(client, study):
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    position = current_position(client, study)
    seen = [position]
    for number in (2, 3):
        response = answer(client, study, position, 3)
        assert response.status_code == 200 and response["Content-Type"] == "application/json"
        data = response.json()
        item = data["item"]
        assert data["saved"] is True
        assert (item["number"], item["total"], item["answered"]) == (number, 3, number - 1)
        assert item["position"] not in seen and item["response"] and item["situation"] and item["emotion"]
        assert item["title"] == f"Item {number} of 3: {study.title}"
        # Shown from the moment the reply left (the response time of its answer counts from there).
        assert Assignment.objects.get(participant__external_id="PID1", position=item["position"]).shown_at
        assert current_position(client, study) == item["position"]  # a refresh shows the same item
        position = item["position"]
        seen.append(position)
    response = answer(client, study, position, 1)
    done = response.json()  # the completion page comes with the last answer: no second request
    assert response.status_code == 200 and done["url"] == step_url(study)
    assert "C0MPLETE" in done["page"] and "Thank you, you have finished" in done["page"]
    assert "C0MPLETE" in client.get(step_url(study)).content.decode()
    participant = Participant.objects.get(external_id="PID1")
    assert participant.status == Participant.Status.COMPLETED
    values = Rating.objects.filter(assignment__participant=participant).order_by("assignment__position")
    assert [r.value for r in values] == [3, 3, 1]
    assert all(r.response_time_ms is not None for r in values)


@pytest.mark.django_db
def test_a_retried_answer_is_stored_once_and_gets_the_same_next_item(client, study):
    """The connection was lost after the server stored the answer: the retry posts the same position."""
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    position = current_position(client, study)
    first = answer(client, study, position, 3).json()
    again = answer(client, study, position, 1).json()  # a changed mind does not overwrite it either
    assert again == first
    assert list(Rating.objects.values_list("value", flat=True)) == [3]


@pytest.mark.django_db
def test_a_stale_tab_gets_the_current_item_and_stores_nothing(client, study):
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    first = current_position(client, study)
    second = answer(client, study, first, 3).json()["item"]["position"]
    third = answer(client, study, second, 3).json()["item"]["position"]
    # A second tab still showing the first item answers it; then one still showing a later item.
    assert answer(client, study, first, 1).json()["item"]["position"] == third
    unanswered_ahead = Participant.objects.get().assignments.exclude(position__in=[first, second, third])
    assert not unanswered_ahead.exists()
    assert list(Rating.objects.order_by("assignment__position").values_list("value", flat=True)) == [3, 3]


@pytest.mark.django_db
def test_refusals_are_json_and_store_nothing(client, study):
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    position = current_position(client, study)
    assert answer(client, study, position, 99).status_code == 400  # not on the scale
    assert answer(client, study, "x", 3).json() == {"error": "bad_request"}
    assert answer(client, study, 9999, 3).status_code == 403  # not one of theirs
    # A filled honeypot is refused before the view runs, with the same page as a plain post.
    assert answer(client, study, position, 3, contact_me_by_fax_only="spam").status_code == 400
    # A page of another step (here: instructions, already passed) stores nothing and sends them on.
    response = client.post(step_url(study), {"step": "instructions"}, **JSON)
    assert response.json() == {"next": step_url(study)}
    assert not Rating.objects.exists()


@pytest.mark.django_db
def test_strangers_are_sent_to_the_entry(study):
    stranger = Client()
    response = stranger.post(step_url(study), {"step": "items", "position": 0, "value": 3}, **JSON)
    assert response.json() == {"next": f"/s/{study.slug}/"}
    response = stranger.post(step_url(study), {"step": "consent", "decision": "agree"}, **JSON)
    assert response.json() == {"next": f"/s/{study.slug}/"}


def _page_step(reply) -> str:
    return STEP.search(reply["page"]).group(1)


@pytest.mark.django_db
def test_each_step_posted_in_place_gets_the_next_steps_page_in_its_reply(client, study):
    """Consent, instructions and the TEQ posted in the background: the services run as for a plain post and
    the reply is the page of the new step, honeypot field included, one request per step."""
    RatingSettings.objects.create(study=study, ask_teq=True)
    enter(client, study, "PID1")
    response = client.post(step_url(study), {"step": "consent", "decision": "agree"}, **JSON)
    reply = response.json()
    assert response.status_code == 200 and reply["url"] == step_url(study)
    assert _page_step(reply) == "instructions" and "contact_me_by_fax_only" in reply["page"]
    assert Participant.objects.get().step == Participant.Step.INSTRUCTIONS
    # The same page posted again (a double click that got through): nothing moves twice.
    again = client.post(step_url(study), {"step": "consent", "decision": "agree"}, **JSON).json()
    assert again == {"next": step_url(study)}
    assert Participant.objects.get().step == Participant.Step.INSTRUCTIONS
    reply = client.post(step_url(study), {"step": "instructions"}, **JSON).json()
    assert _page_step(reply) == "teq"
    # An incomplete TEQ: its page with the errors, in place, with the status the plain post gets.
    response = client.post(step_url(study), {"step": "teq", "teq_1": "often"}, **JSON)
    assert response.status_code == 400 and "Please answer every statement" in response.json()["page"]
    assert Participant.objects.get().step == Participant.Step.TEQ
    answers = {f"teq_{n}": "often" for n in range(1, 17)}
    reply = client.post(step_url(study), {"step": "teq", **answers}, **JSON).json()
    assert _page_step(reply) == "items" and "data-in-place" in reply["page"]
    participant = Participant.objects.get()
    assert participant.step == Participant.Step.ITEMS and participant.teq_score is not None
    # The item in the reply is the one a refresh shows, already marked as shown.
    position = int(POSITION.search(reply["page"]).group(1))
    assert current_position(client, study) == position
    assert Assignment.objects.get(participant=participant, position=position).shown_at is not None


@pytest.mark.django_db
def test_declining_consent_in_place_gets_the_screened_out_page(client, study):
    enter(client, study, "PID1")
    reply = client.post(step_url(study), {"step": "consent", "decision": "decline"}, **JSON).json()
    assert Participant.objects.get().status == Participant.Status.SCREENED_OUT
    assert 'name="step"' not in reply["page"] and reply["url"] == step_url(study)
    assert "<h1>" in reply["page"] and reply["page"].split("<h1>")[1].split("</h1>")[0] in (
        client.get(step_url(study)).content.decode()
    )


@pytest.mark.django_db
def test_the_csrf_check_still_applies_to_background_posts(client, study):
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    page = client.get(step_url(study)).content.decode()
    position = current_position(client, study)
    token = CSRF_TOKEN.search(page).group(1)
    strict = Client(enforce_csrf_checks=True)
    strict.cookies = client.cookies
    assert answer(strict, study, position, 3).status_code == 403  # without the form's token
    assert not Rating.objects.exists()
    response = answer(strict, study, position, 3, csrfmiddlewaretoken=token)  # what participant.js sends
    assert response.status_code == 200 and response.json()["saved"]


@pytest.mark.django_db
def test_an_attention_check_shown_in_place_looks_like_an_item(client, study):
    AttentionCheckFactory(study=study, after_item=1, expected_value=2, emotion_label="attention check")
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    item = answer(client, study, current_position(client, study), 3).json()["item"]
    assert item["emotion"] != "attention check" and "Okay" in item["response"]
    assert (item["number"], item["total"]) == (2, 4)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_same_background_answer_posted_concurrently_is_stored_exactly_once(requires_postgres):
    study = rating_study_build(conditions=1, prompts=5, items_per_participant=3)
    browser, position = at_first_item(study)

    def post(i):
        tab = another_tab(browser.cookies)
        response = answer(tab, study, position, 3 if i % 2 else 1)
        return response.json()["item"]["position"]

    next_positions, errors = race(post, 30)

    assert not errors and len(set(next_positions.values())) == 1  # every attempt got the same next item
    assert position not in set(next_positions.values())
    assert Rating.objects.filter(assignment__position=position).count() == 1
    assert Rating.objects.count() == 1
