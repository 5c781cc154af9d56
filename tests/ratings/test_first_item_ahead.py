"""The consent page carries the participant's first item too (ratings/shared_pages.py `consent_page`): with
JavaScript, "I agree" shows the instructions and their button the first item, both without a request, and the
first answer posts the consent and the instructions with it (`agreed=1`, `begun=1`, `shown_ms`): one request
for all three (flow.steps_on_the_way). These tests check
what the page carries, that the answer takes the three steps, each once, with the item's response
time the page measured, and that every rule of the three posts still holds (the consent's hold, a decline in
another tab, a retry, many tabs at once)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from kinds.rating.models import Rating
from studies.models import Assignment, Emotion, Participant
from tests.concurrency import race
from tests.factories import AttentionCheckFactory, rating_study_build
from tests.ratings.helpers import another_tab, carried, enter, step_url

pytestmark = pytest.mark.usefixtures("pages_uncached")
JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture
def study():
    return rating_study_build(conditions=1, prompts=6, items_per_participant=3)


def first_answer(item: dict, *, agreed: bool = True, shown_ms: int = 4000, value: int = 3) -> dict:
    fields = {"step": "items", "position": item["item"]["position"], "value": value, "begun": "1"}
    fields["shown_ms"] = str(shown_ms)
    if agreed:
        fields["agreed"] = "1"
    return fields


@pytest.mark.django_db
def test_the_consent_page_carries_the_first_item_without_showing_it(client, study):
    page = enter(client, study, "PID1")
    item = carried(page, "first-item")
    assert item is not None and item["url"] == step_url(study)
    assert item["item"]["number"] == 1 and item["item"]["total"] == 3
    assert 'name="step" value="items"' in item["page"] and "<form" in item["page"]
    participant = Participant.objects.get()
    first = Assignment.objects.get(participant=participant, position=item["item"]["position"])
    assert item["item"]["response"] == first.response.text
    # Carried, not shown: nothing moved and no item marked as shown by the page.
    assert participant.step == Participant.Step.CONSENT
    assert not Assignment.objects.filter(participant=participant, shown_at__isnull=False).exists()
    # Escaped: the consent page has one form of its own.
    assert page.content.decode().lower().count("<form") == 1


@pytest.mark.django_db
def test_a_study_that_asks_the_teq_first_carries_no_item(client):
    teq_study = rating_study_build(conditions=1, prompts=6, items_per_participant=3, ask_teq=True)
    assert carried(enter(client, teq_study, "PID1"), "first-item") is None


@pytest.mark.django_db(transaction=True)
def test_the_first_answer_takes_the_consent_and_the_instructions_with_it(client, study):
    item = carried(enter(client, study, "PID1"), "first-item")
    Participant.objects.update(started_at=timezone.now() - timedelta(seconds=30))  # entered 30 s ago
    reply = client.post(step_url(study), first_answer(item, shown_ms=4000), **JSON)
    assert reply.status_code == 200, reply.content
    data = reply.json()
    assert data["saved"] is True and data["item"]["number"] == 2
    participant = Participant.objects.get()
    assert (participant.status, participant.step) == (Participant.Status.ACTIVE, Participant.Step.ITEMS)
    rating = Rating.objects.get()
    assert rating.assignment.position == item["item"]["position"] and rating.value == 3
    # Its response time is the time the page says it showed the item (the request's own time on top).
    assert 4000 <= rating.response_time_ms < 4000 + 5000


@pytest.mark.django_db(transaction=True)
def test_an_attention_check_first_is_carried_disguised_and_its_answer_counted_as_a_check(client, study):
    """The statement takes the consent and the instructions and leaves an attention check's answer to the view
    (which counts a failed check), as it leaves every check's."""
    AttentionCheckFactory(study=study, after_item=0, expected_value=2, emotion_label="attention check")
    item = carried(enter(client, study, "PID1"), "first-item")
    assert item["item"]["position"] == 0 and (item["item"]["number"], item["item"]["total"]) == (1, 4)
    emotions = set(Emotion.objects.filter(prompts__study=study).values_list("name", flat=True))
    assert item["item"]["emotion"] in emotions and "Okay" in item["item"]["response"]
    data = client.post(step_url(study), first_answer(item, value=3), **JSON).json()  # not the asked "Okay"
    assert data["saved"] is True and data["item"]["number"] == 2
    participant = Participant.objects.get()
    assert participant.step == Participant.Step.ITEMS and participant.attention_failures == 1
    assert Rating.objects.get().assignment.kind == Assignment.Kind.ATTENTION


@pytest.mark.django_db(transaction=True)
def test_the_time_the_page_claims_is_bounded_by_the_enrolment(client, study):
    item = carried(enter(client, study, "PID1"), "first-item")
    reply = client.post(step_url(study), first_answer(item, shown_ms=10 * 60 * 60 * 1000), **JSON)
    assert reply.json()["item"]["number"] == 2
    participant = Participant.objects.get()
    first = Assignment.objects.get(participant=participant, position=item["item"]["position"])
    assert first.shown_at >= participant.started_at
    assert first.rating.response_time_ms <= (timezone.now() - participant.started_at).total_seconds() * 1000


@pytest.mark.django_db(transaction=True)
def test_a_retried_first_answer_is_stored_once_and_gets_the_same_next_item(client, study):
    item = carried(enter(client, study, "PID1"), "first-item")
    fields = first_answer(item)
    first = client.post(step_url(study), fields, **JSON).json()
    again = client.post(step_url(study), fields, **JSON).json()
    assert again["saved"] is True and again["item"] == first["item"]
    assert Rating.objects.count() == 1
    assert Participant.objects.get().step == Participant.Step.ITEMS


@pytest.mark.django_db(transaction=True)
def test_the_consent_sent_on_its_own_leaves_the_instructions_to_the_first_answer(client, study):
    """participant.js sent the consent before its hold ended (or as the page was hidden), while the first
    item was on screen: the answer then comes from a participant on the instructions, with or without
    `agreed=1`."""
    item = carried(enter(client, study, "PID1"), "first-item")
    client.post(step_url(study), {"step": "consent", "decision": "agree"})  # sendBeacon: a plain post
    assert Participant.objects.get().step == Participant.Step.INSTRUCTIONS
    data = client.post(step_url(study), first_answer(item, agreed=False), **JSON).json()
    assert data["item"]["number"] == 2 and Rating.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_after_the_consents_hold_the_first_answer_stores_nothing(client, study):
    item = carried(enter(client, study, "PID1"), "first-item")
    Participant.objects.update(last_seen_at=timezone.now() - timedelta(minutes=11))  # the hold is 10 minutes
    reply = client.post(step_url(study), first_answer(item), **JSON)
    assert reply.json() == {"next": step_url(study)}
    participant = Participant.objects.get()
    assert participant.status == Participant.Status.TIMED_OUT and not Rating.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_participant_who_declined_in_another_tab_stores_no_first_answer(client, study):
    item = carried(enter(client, study, "PID1"), "first-item")
    client.post(step_url(study), {"step": "consent", "decision": "decline"})
    assert client.post(step_url(study), first_answer(item), **JSON).json() == {"next": step_url(study)}
    assert Participant.objects.get().status == Participant.Status.SCREENED_OUT
    assert not Rating.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_without_javascript_the_same_fields_posted_plainly_take_all_three_steps(client, study):
    """participant.js posts a form the plain way when it cannot read the reply: the fields are the same."""
    item = carried(enter(client, study, "PID1"), "first-item")
    reply = client.post(step_url(study), first_answer(item))
    assert reply.status_code == 302 and reply["Location"] == step_url(study)
    assert Participant.objects.get().step == Participant.Step.ITEMS and Rating.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_first_answer_from_many_tabs_at_once_is_stored_once(client, study, requires_postgres):
    """Twelve tabs at once: a third send the consent on its own, the rest the first answer with everything.
    The participant passes each step once and the first item is rated once, with no error."""
    item = carried(enter(client, study, "PID1"), "first-item")
    cookies = client.cookies

    def post(i):
        tab = another_tab(cookies)
        if i % 3 == 0:
            return tab.post(step_url(study), {"step": "consent", "decision": "agree"}).status_code
        return tab.post(step_url(study), first_answer(item, value=1 + i % 3), **JSON).json()

    replies, errors = race(post, 12)

    assert not errors and len(replies) == 12
    answers = [reply for i, reply in replies.items() if i % 3]
    assert all(reply["item"]["number"] == 2 for reply in answers), answers
    participant = Participant.objects.get()
    assert participant.step == Participant.Step.ITEMS
    rating = Rating.objects.get()
    assert rating.assignment.position == item["item"]["position"]
    shown = Assignment.objects.filter(participant=participant, shown_at__isnull=False).count()
    assert shown == 2  # the first item and the second, each once
