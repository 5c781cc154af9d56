"""The two setup steps posted in the background are each one statement on PostgreSQL (ratings/answer_path.py):
the consent agreed to moves the participant to the instructions by one UPDATE (`_consent_sql`), and the
instructions take them to their first item (`rating_items_begin_in_place`), whose reply — on that path and on
the view's — carries the item page's shell, the same for everyone, with the item beside it
(`shared_pages.item_in_place`). The rows and the replies are the view's (tests/ratings/test_answer_path.py
compares the two paths); these tests check the statements, the shell, what is left to the view, and races."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.signals import template_rendered
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ratings import answer_path
from studies.models import Assignment, Emotion, Participant
from tests.factories import (
    AttentionCheckFactory,
    ParticipantFactory,
    questionnaire_study_create,
    rating_study_build,
)
from tests.ratings.helpers import CSRF_TOKEN, POSITION, another_tab, enter, step_url
from tests.studies.test_assignment_races import race

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("pages_uncached")]
JSON = {"HTTP_ACCEPT": "application/json"}
FUNCTION = "rating_items_begin_in_place("
CONSENT = {"step": "consent", "decision": "agree"}


@pytest.fixture
def study():
    return rating_study_build(conditions=1, prompts=8, items_per_participant=3)


def at_instructions(client, study, pid: str) -> Participant:
    enter(client, study, pid)
    client.post(step_url(study), {"step": "consent", "decision": "agree"}, **JSON)
    participant = Participant.objects.get(external_id=pid)
    assert participant.step == Participant.Step.INSTRUCTIONS
    return participant


def instructions(client, study):
    return client.post(step_url(study), {"step": "instructions"}, **JSON)


def begin(participant: Participant, slug: str, now=None) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT outcome FROM {FUNCTION}%s, %s, %s)", [participant.pk, slug, now or timezone.now()]
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db
def test_one_statement_takes_the_participant_to_the_first_item_whose_texts_come_beside_the_shell(
    client, study, requires_postgres
):
    participant = at_instructions(client, study, "PID1")
    with CaptureQueriesContext(connection) as queries:
        response = instructions(client, study)
    assert [q["sql"] for q in queries.captured_queries if FUNCTION in q["sql"]]
    assert len(queries.captured_queries) == 1  # the session comes with the rate limiter's round trip to Redis

    reply = response.json()
    item = reply["item"]
    assert response.status_code == 200 and reply["url"] == step_url(study)
    assert (item["number"], item["total"], item["answered"]) == (1, 3, 0)
    assert item["title"] == f"Item 1 of 3: {study.title}"
    shell = reply["page"]
    assert "data-in-place" in shell and 'name="step" value="items"' in shell
    assert int(POSITION.search(shell).group(1)) == item["position"]
    assert "contact_me_by_fax_only" in shell  # the honeypot, as on every participant form
    for text in ("emotion", "situation", "utterance", "response"):
        assert item[text] and item[text] not in shell  # the script fills them in

    fresh = Participant.objects.get(pk=participant.pk)
    assert fresh.step == Participant.Step.ITEMS and fresh.status == Participant.Status.ACTIVE
    assert fresh.last_seen_at > timezone.now() - timedelta(seconds=10)
    first = Assignment.objects.get(participant=participant, position=item["position"])
    assert first.shown_at is not None and first.answered_at is None
    # A refresh shows the same item, with the texts the reply carried, and keeps its first showing.
    page = client.get(step_url(study)).content.decode()
    assert int(POSITION.search(page).group(1)) == item["position"]
    assert all(item[text] in page for text in ("situation", "utterance", "response"))
    assert Assignment.objects.get(pk=first.pk).shown_at == first.shown_at


@pytest.mark.django_db
def test_the_shell_is_rendered_once_for_everyone_at_the_same_item_with_each_ones_token(
    study, requires_postgres
):
    names = []

    def seen(sender, template, context, **kwargs):
        names.append(template.name)

    browsers = [Client(enforce_csrf_checks=True) for _ in range(3)]
    template_rendered.connect(seen)
    try:
        # The consent page (each entry) carries the shell too, with the first item: from the same cache.
        for number, browser in enumerate(browsers):
            enter(browser, study, f"PID{number}")
            token = CSRF_TOKEN.search(browser.get(step_url(study)).content.decode()).group(1)
            data = {"step": "consent", "decision": "agree", "csrfmiddlewaretoken": token}
            browser.post(step_url(study), data, **JSON)
        replies = []
        for browser in browsers:
            token = CSRF_TOKEN.search(browser.get(step_url(study)).content.decode()).group(1)
            data = {"step": "instructions", "csrfmiddlewaretoken": token}
            replies.append(browser.post(step_url(study), data, **JSON).json())
    finally:
        template_rendered.disconnect(seen)
    assert [name for name in names if name == "ratings/item.html"] == ["ratings/item.html"]
    tokens = {CSRF_TOKEN.search(reply["page"]).group(1) for reply in replies}
    assert len(tokens) == 3
    assert len({CSRF_TOKEN.sub("", reply["page"]) for reply in replies}) == 1
    # Each participant answers their first item with the token their shell carried.
    for browser, reply in zip(browsers, replies, strict=True):
        data = {
            "step": "items",
            "position": reply["item"]["position"],
            "value": 3,
            "csrfmiddlewaretoken": CSRF_TOKEN.search(reply["page"]).group(1),
        }
        answered = browser.post(step_url(study), data, **JSON)
        assert answered.status_code == 200 and answered.json()["item"]["number"] == 2


@pytest.mark.django_db
def test_an_attention_check_first_is_shown_as_an_item_with_one_of_the_studys_emotions(
    client, study, requires_postgres
):
    AttentionCheckFactory(study=study, after_item=0, expected_value=2, emotion_label="attention check")
    at_instructions(client, study, "PID1")
    item = instructions(client, study).json()["item"]
    assert item["position"] == 0 and (item["number"], item["total"]) == (1, 4)
    emotions = set(Emotion.objects.filter(prompts__study=study).values_list("name", flat=True))
    assert item["emotion"] in emotions
    assert "Okay" in item["response"]  # the check's own text


@pytest.mark.django_db
def test_what_the_statement_does_not_take_it_leaves_untouched(client, study, requires_postgres):
    participant = at_instructions(client, study, "PID1")
    rows = lambda: (  # noqa: E731
        Participant.objects.filter(pk=participant.pk).values_list("status", "step", "last_seen_at").get(),
        list(Assignment.objects.filter(participant=participant).values_list("shown_at", flat=True)),
    )
    before = rows()
    assert begin(participant, "another-study") == "fallback"
    study.ask_teq = True  # the TEQ comes next: the view shows its page
    study.save(update_fields=["ask_teq"])
    assert begin(participant, study.slug) == "fallback"
    study.ask_teq = False
    study.save(update_fields=["ask_teq"])
    later = timezone.now() + timedelta(minutes=study.time_limit_minutes + 1)
    assert begin(participant, study.slug, now=later) == "fallback"  # past the time limit: the view times out
    Participant.objects.filter(pk=participant.pk).update(step=Participant.Step.CONSENT)
    assert begin(participant, study.slug) == "fallback"
    Participant.objects.filter(pk=participant.pk).update(step=Participant.Step.INSTRUCTIONS)
    assert rows() == before
    assert begin(participant, study.slug) == "begun"
    assert begin(participant, study.slug) == "fallback"  # already on the items: a second tab's post


@pytest.mark.django_db
def test_a_study_that_asks_the_teq_gets_the_teq_page_from_the_view(client, study, requires_postgres):
    study.ask_teq = True
    study.save(update_fields=["ask_teq"])
    at_instructions(client, study, "PID1")
    with CaptureQueriesContext(connection) as queries:
        reply = instructions(client, study).json()
    assert 'name="step" value="teq"' in reply["page"] and "item" not in reply
    assert Participant.objects.get().step == Participant.Step.TEQ
    assert any(FUNCTION in q["sql"] for q in queries.captured_queries)  # tried, left to the view


@pytest.mark.django_db(transaction=True)
def test_the_instructions_posted_from_many_tabs_at_once_move_the_participant_once(requires_postgres):
    study = rating_study_build(conditions=1, prompts=6, items_per_participant=3)
    browser = Client()
    participant = at_instructions(browser, study, "PID1")
    cookies = browser.cookies

    def post(i):
        tab = another_tab(cookies)
        return instructions(tab, study).json()

    replies, errors = race(post, 12)

    assert not errors and len(replies) == 12
    shown = [reply for reply in replies.values() if "item" in reply]
    # One tab took the participant to the items; the others found them there already and were sent to the
    # step page, which shows that same item.
    assert len(shown) == 1
    assert all(reply == {"next": step_url(study)} for reply in replies.values() if "item" not in reply)
    fresh = Participant.objects.get(pk=participant.pk)
    assert fresh.step == Participant.Step.ITEMS and fresh.status == Participant.Status.ACTIVE
    assigned = Assignment.objects.filter(participant=participant)
    assert assigned.exclude(shown_at=None).count() == 1
    assert assigned.get(position=shown[0]["item"]["position"]).shown_at is not None


# --- The consent -----------------------------------------------------------------------------------------


def participant_rows(participant: Participant) -> tuple:
    return Participant.objects.filter(pk=participant.pk).values_list("status", "step", "last_seen_at").get()


@pytest.mark.django_db
def test_the_consent_is_one_update_and_the_reply_the_instructions_page(client, study, requires_postgres):
    enter(client, study, "PID1")
    participant = Participant.objects.get(external_id="PID1")
    Participant.objects.filter(pk=participant.pk).update(last_seen_at=timezone.now() - timedelta(seconds=30))
    with CaptureQueriesContext(connection) as queries:
        response = client.post(step_url(study), CONSENT, **JSON)
    statements = [q["sql"] for q in queries.captured_queries]
    assert len(statements) == 1 and statements[0].startswith("UPDATE") and "RETURNING" in statements[0]
    reply = response.json()
    assert response.status_code == 200 and reply["url"] == step_url(study)
    assert "<h1>Instructions</h1>" in reply["page"] and 'name="step" value="instructions"' in reply["page"]
    status, step, seen = participant_rows(participant)
    assert (status, step) == (Participant.Status.ACTIVE, Participant.Step.INSTRUCTIONS)
    assert seen > timezone.now() - timedelta(seconds=10)


@pytest.mark.django_db
def test_what_the_consents_update_does_not_take_it_leaves_untouched(client, study, requires_postgres):
    enter(client, study, "PID1")
    participant = Participant.objects.get(external_id="PID1")
    before = participant_rows(participant)

    def taken(slug=study.slug, now=None) -> bool:
        return (
            answer_path.consent_in_place(None, participant_id=participant.pk, slug=slug, now=now) is not None
        )

    assert not taken(slug="another-study")
    hold = timezone.now() + timedelta(minutes=11)  # past the consent's hold (10 minutes): the view times out
    assert not taken(now=hold)
    Participant.objects.filter(pk=participant.pk).update(status=Participant.Status.RETURNED)
    assert not taken()
    Participant.objects.filter(pk=participant.pk).update(
        status=Participant.Status.ACTIVE, step=Participant.Step.INSTRUCTIONS
    )
    assert not taken()  # already past the consent: a second tab's post
    Participant.objects.filter(pk=participant.pk).update(step=Participant.Step.CONSENT)
    assert participant_rows(participant) == before
    # Another kind's consent leads to that kind's steps: left to the view.
    other = ParticipantFactory(
        study=questionnaire_study_create(slug="q", title="q", state="live"),
        step=Participant.Step.CONSENT,
        last_seen_at=timezone.now(),
    )
    assert answer_path.consent_in_place(None, participant_id=other.pk, slug="q") is None
    assert participant_rows(other)[1] == Participant.Step.CONSENT


@pytest.mark.django_db(transaction=True)
def test_the_consent_agreed_to_from_many_tabs_at_once_moves_the_participant_once(requires_postgres):
    study = rating_study_build(conditions=1, prompts=6, items_per_participant=3)
    browser = Client()
    enter(browser, study, "PID1")
    cookies = browser.cookies

    def post(i):
        tab = another_tab(cookies)
        return tab.post(step_url(study), CONSENT, **JSON).json()

    replies, errors = race(post, 12)

    assert not errors and len(replies) == 12
    pages = [reply for reply in replies.values() if "page" in reply]
    assert len(pages) == 1 and "<h1>Instructions</h1>" in pages[0]["page"]
    assert all(reply == {"next": step_url(study)} for reply in replies.values() if "page" not in reply)
    assert Participant.objects.get().step == Participant.Step.INSTRUCTIONS


@pytest.mark.django_db
def test_the_instructions_posted_with_the_consent_are_one_statement(client, study, requires_postgres):
    """participant.js posts the consent with the instructions (`agreed=1`): both steps in one round trip."""
    enter(client, study, "PID1")
    with CaptureQueriesContext(connection) as queries:
        response = client.post(step_url(study), {"step": "instructions", "agreed": "1"}, **JSON)
    assert response.status_code == 200 and response.json()["item"]["number"] == 1
    statements = [q["sql"] for q in queries.captured_queries]
    assert len(statements) == 1 and "rating_consent_begin_in_place(" in statements[0], statements
    participant = Participant.objects.get()
    assert (participant.step, participant.status) == (Participant.Step.ITEMS, Participant.Status.ACTIVE)
    assert participant.assignments.filter(shown_at__isnull=False).count() == 1
