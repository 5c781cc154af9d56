"""The consent page carries the instructions page (ratings/shared_pages.py `consent_page`): with JavaScript,
"I agree" shows them without a request, and the instructions' button posts the consent with them
(`agreed=1`), one request for both steps. These tests check what the page carries, that the post takes both
steps, that it keeps every rule the two
posts keep (the consent's hold, a participant who declined, one move under a race), and that the consent
posted on its own (participant.js sends it before the hold ends or when the page is hidden) still works."""

import re
from datetime import timedelta

import pytest
from django.test import RequestFactory
from django.utils import timezone

from config.ratelimit import HONEYPOT_FIELD
from ratings import shared_pages
from studies.models import Assignment, Participant
from tests.concurrency import race
from tests.factories import ParticipantFactory, questionnaire_study_create, rating_study_build
from tests.ratings.helpers import another_tab, carried, enter, step_url

pytestmark = pytest.mark.usefixtures("pages_uncached")
JSON = {"HTTP_ACCEPT": "application/json"}
BOTH = {"step": "instructions", "agreed": "1"}
TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"')


@pytest.fixture
def study():
    return rating_study_build(conditions=1, prompts=6, items_per_participant=3)


def main(page: str) -> str:
    """The page's main element, its CSRF token (masked afresh for each request) left out."""
    return TOKEN.sub("", page.split("<main")[1].split("</main>")[0])


def shown(participant: Participant) -> list[int]:
    return list(
        Assignment.objects.filter(participant=participant, shown_at__isnull=False).values_list(
            "position", flat=True
        )
    )


@pytest.mark.django_db
def test_the_consent_page_carries_the_instructions_page_for_the_script(client, study, settings):
    settings.PARTICIPANT_CONSENT_HOLD_MINUTES = 7
    page = enter(client, study, "PID1")
    ahead = carried(page, "next-step")
    assert ahead is not None and ahead["url"] == step_url(study) and ahead["hold"] == 7 * 60
    assert "<h1>Instructions</h1>" in ahead["page"] and 'name="step" value="instructions"' in ahead["page"]
    assert f'name="{HONEYPOT_FIELD}"' in ahead["page"]
    # Escaped: the consent page has one form of its own, and the carried one is not parsed as markup.
    assert page.content.decode().lower().count("<form") == 1
    assert Participant.objects.get().step == Participant.Step.CONSENT  # nothing moved by showing it
    # The carried page is the instructions page the participant would get at that step.
    client.post(step_url(study), {"step": "consent", "decision": "agree"})
    instructions = client.get(step_url(study)).content.decode()
    assert main(ahead["page"]) == main(instructions)
    assert carried(client.get(step_url(study)), "next-step") is None  # the instructions page carries nothing


@pytest.mark.django_db
def test_a_consent_that_leads_elsewhere_carries_nothing(study):
    other = questionnaire_study_create(slug="q", title="q", state="live")
    elsewhere = ParticipantFactory(study=other, step=Participant.Step.CONSENT, last_seen_at=timezone.now())
    page = shared_pages.consent_page(RequestFactory().get("/s/q/step/"), elsewhere)
    assert page.status_code == 200 and "<h1>Information and consent</h1>" in page.content.decode()
    assert carried(page, "next-step") is None
    # Nor does the page of a participant no longer on the consent step (a staff preview of an old page).
    rating = ParticipantFactory(study=study, step=Participant.Step.INSTRUCTIONS, last_seen_at=timezone.now())
    assert carried(shared_pages.consent_page(RequestFactory().get("/"), rating), "next-step") is None


@pytest.mark.django_db(transaction=True)
def test_the_instructions_posted_with_the_consent_take_both_steps_and_reply_with_the_first_item(
    client, study
):
    enter(client, study, "PID1")
    reply = client.post(step_url(study), BOTH, **JSON)
    assert reply.status_code == 200, reply.content
    data = reply.json()
    assert data["url"] == step_url(study) and data["item"]["number"] == 1 and "<form" in data["page"]
    participant = Participant.objects.get()
    assert (participant.status, participant.step) == (Participant.Status.ACTIVE, Participant.Step.ITEMS)
    assert shown(participant) == [data["item"]["position"]]


@pytest.mark.django_db(transaction=True)
def test_without_javascript_the_same_fields_posted_plainly_take_both_steps(client, study):
    """participant.js posts a form the plain way when it cannot read the reply: the fields are the same."""
    enter(client, study, "PID1")
    reply = client.post(step_url(study), BOTH)
    assert reply.status_code == 302 and reply["Location"] == step_url(study)
    assert Participant.objects.get().step == Participant.Step.ITEMS


@pytest.mark.django_db(transaction=True)
def test_the_consent_sent_on_its_own_first_leaves_the_instructions_to_their_post(client, study):
    """The script sent the consent before the hold ended (or as the page was hidden): the instructions then
    arrive with `agreed=1` from a participant already past the consent, and take them to their first item."""
    enter(client, study, "PID1")
    client.post(step_url(study), {"step": "consent", "decision": "agree"})  # sendBeacon: a plain post
    assert Participant.objects.get().step == Participant.Step.INSTRUCTIONS
    data = client.post(step_url(study), BOTH, **JSON).json()
    assert data["item"]["number"] == 1
    assert Participant.objects.get().step == Participant.Step.ITEMS


@pytest.mark.django_db(transaction=True)
def test_after_the_consents_hold_the_post_takes_nothing_and_the_participant_sees_their_outcome(client, study):
    enter(client, study, "PID1")
    Participant.objects.update(last_seen_at=timezone.now() - timedelta(minutes=11))  # the hold is 10 minutes
    reply = client.post(step_url(study), BOTH, **JSON)
    assert reply.json() == {"next": step_url(study)}
    participant = Participant.objects.get()
    assert participant.status == Participant.Status.TIMED_OUT and shown(participant) == []


@pytest.mark.django_db(transaction=True)
def test_a_participant_who_declined_in_another_tab_is_not_taken_on(client, study):
    enter(client, study, "PID1")
    client.post(step_url(study), {"step": "consent", "decision": "decline"})
    assert client.post(step_url(study), BOTH, **JSON).json() == {"next": step_url(study)}
    participant = Participant.objects.get()
    assert participant.status == Participant.Status.SCREENED_OUT and shown(participant) == []


@pytest.mark.django_db(transaction=True)
def test_the_consent_and_the_instructions_with_it_from_many_tabs_at_once_move_the_participant_once(
    client, study, requires_postgres
):
    """Twelve tabs at once: half send the consent on its own (a beacon, a plain post), half the instructions
    with it in the background. The participant reaches their first item once, shown once, with no error."""
    enter(client, study, "PID1")
    cookies = client.cookies

    def post(i):
        tab = another_tab(cookies)
        if i % 2:
            return tab.post(step_url(study), {"step": "consent", "decision": "agree"}).status_code
        return tab.post(step_url(study), BOTH, **JSON).json()

    replies, errors = race(post, 12)

    assert not errors and len(replies) == 12
    assert all(reply == 302 for i, reply in replies.items() if i % 2)
    items = [reply["item"] for i, reply in replies.items() if not i % 2 and "item" in reply]
    assert items and len({item["position"] for item in items}) == 1 and items[0]["number"] == 1
    assert all(
        reply == {"next": step_url(study)}
        for i, reply in replies.items()
        if not i % 2 and "item" not in reply
    )
    participant = Participant.objects.get()
    assert participant.step == Participant.Step.ITEMS and shown(participant) == [items[0]["position"]]
