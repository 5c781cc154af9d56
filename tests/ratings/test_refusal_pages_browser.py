"""The page a participant of an earlier study of a wave's series sees, in Chromium: axe-clean on a phone and a
desktop, and it says the real reason."""

import pytest
from playwright.sync_api import expect

from studies.models import Response
from studies.services import study_launch
from studies.waves import study_extend
from tests.a11y import axe_violations
from tests.screenshots import screenshot
from tests.studies.test_waves import closed_parent

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("viewport", ["phone", "desktop"])
def test_a_participant_of_the_parent_sees_why_they_cannot_join_the_wave(live_server, page_at, viewport):
    wave = study_extend(parent=closed_parent(), new_slug="wave1", conditions=["llama"])
    llama = wave.conditions.get(name="llama")
    for prompt in wave.prompts.all():
        Response.objects.create(prompt=prompt, condition=llama, text=f"llama says {prompt.dialogue_id}")
    study_launch(study=wave)
    page = page_at(viewport)
    page.goto(f"{live_server.url}/s/{wave.slug}/?PROLIFIC_PID=old1&STUDY_ID=S&SESSION_ID=X")
    expect(page.locator("h1")).to_have_text("You took part in an earlier study of this series")
    screenshot(page, f"already-in-family-{viewport}")
    assert axe_violations(page, impacts=("minor", "moderate", "serious", "critical")) == []
    assert not wave.participants.exists()
