"""The consent and instructions pages come from a per-process cache (ratings/shared_pages.py): rendered once
for everyone at the same step of the same study, each reply with its own working CSRF token, and an edit of
what the page shows (texts, examples, steps, preview) served on the very next request."""

import re

import pytest
from django.test import Client
from django.test.signals import template_rendered

from kinds.rating.models import RatingSettings
from studies.models import Participant
from studies.pages import TOKEN_MARK
from tests.factories import rating_study_build
from tests.ratings.helpers import CSRF_TOKEN, enter, step_url

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("pages_uncached")]


@pytest.fixture
def renders():
    """The names of the templates rendered while the test runs."""
    names = []

    def seen(sender, template, context, **kwargs):
        names.append(template.name)

    template_rendered.connect(seen)
    yield names
    template_rendered.disconnect(seen)


@pytest.fixture
def study():
    return rating_study_build(
        conditions=1,
        prompts=12,
        items_per_participant=3,
        consent_text="Version one of the consent.",
        instructions_text="Read carefully.",
        worked_examples=[{"situation": "A first example.", "response": "Sorry to hear.", "rating": 3}],
    )


def _consent_page(study, pid: str) -> tuple[Client, str]:
    client = Client(enforce_csrf_checks=True)
    response = enter(client, study, pid)
    assert response.status_code == 200
    return client, response.content.decode()


def test_a_second_participant_gets_the_page_without_rendering_it(study, renders):
    _consent_page(study, "P1")
    assert renders.count("ratings/consent.html") == 1
    renders.clear()
    _, page = _consent_page(study, "P2")
    assert "Version one of the consent." in page
    assert "ratings/consent.html" not in renders


def test_every_reply_carries_its_own_token_and_the_posts_it_makes_are_accepted(study):
    pages = [_consent_page(study, pid) for pid in ("P1", "P2", "P3")]
    tokens = [CSRF_TOKEN.search(page).group(1) for _, page in pages]
    assert len(set(tokens)) == 3
    for (client, page), token in zip(pages, tokens, strict=True):
        assert TOKEN_MARK not in page
        response = client.post(
            step_url(study), {"step": "consent", "decision": "agree", "csrfmiddlewaretoken": token}
        )
        assert response.status_code == 302
        instructions = client.get(step_url(study)).content.decode()
        assert "Read carefully." in instructions
        token = CSRF_TOKEN.search(instructions).group(1)
        response = client.post(step_url(study), {"step": "instructions", "csrfmiddlewaretoken": token})
        assert response.status_code == 302
    steps = Participant.objects.filter(study=study).values_list("step", flat=True)
    assert list(steps) == ["items"] * 3


def test_a_post_without_the_pages_token_is_refused(study):
    client, _ = _consent_page(study, "P1")
    response = client.post(step_url(study), {"step": "consent", "decision": "agree"})
    assert response.status_code == 403


def test_an_edit_is_shown_on_the_next_request(study):
    _consent_page(study, "P1")
    study.consent_text = "Version two of the consent."
    study.save()
    _, page = _consent_page(study, "P2")
    assert "Version two of the consent." in page and "Version one" not in page

    client, _ = _consent_page(study, "P3")
    client.post(step_url(study), {"step": "consent", "decision": "agree"}, HTTP_X_CSRFTOKEN=_token(client))
    assert "A first example." in client.get(step_url(study)).content.decode()
    study.worked_examples = [{"situation": "An edited example.", "response": "Oh no.", "rating": 1}]
    study.save()
    page = client.get(step_url(study)).content.decode()
    assert "An edited example." in page and "A first example." not in page


def test_the_step_count_and_the_preview_banner_are_part_of_the_page(study, admin_client):
    _, page = _consent_page(study, "P1")
    assert re.search(r"Step 1 of 3\b", page)
    RatingSettings.objects.create(study=study, ask_teq=True)
    _, page = _consent_page(study, "P2")
    assert re.search(r"Step 1 of 4\b", page)

    preview = admin_client.get(f"/s/{study.slug}/", {"preview": "1"}, follow=True).content.decode()
    assert "Staff preview" in preview
    _, page = _consent_page(study, "P3")
    assert "Staff preview" not in page


def _token(client: Client) -> str:
    return client.cookies["csrftoken"].value
