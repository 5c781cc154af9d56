"""Answers under concurrency: the same answer posted at the same instant from many requests of one participant."""

import pytest
from django.test import Client

from kinds.rating.models import Rating
from studies.models import Participant
from tests.factories import rating_study_build
from tests.ratings.helpers import consent_and_instructions, current_position, enter, step_url
from tests.studies.test_assignment_races import race

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_the_same_answer_posted_concurrently_is_stored_exactly_once(requires_postgres):
    study = rating_study_build(conditions=1, prompts=5, items_per_participant=3)
    browser = Client()
    enter(browser, study, "PID1")
    consent_and_instructions(browser, study)
    position = current_position(browser, study)
    cookies = browser.cookies

    def post(i):
        tab = Client()  # one tab per thread, all sharing the participant's session cookie
        tab.cookies = cookies
        # Half of them change their mind: only the first answer to commit may count.
        value = 3 if i % 2 else 1
        return tab.post(step_url(study), {"step": "items", "position": position, "value": value}).status_code

    statuses, errors = race(post, 30)

    assert not errors and set(statuses.values()) == {302}
    ratings = Rating.objects.filter(assignment__participant__external_id="PID1")
    assert ratings.count() == 1
    assert ratings.get().assignment.position == position
    assert current_position(browser, study) != position
    assert Participant.objects.get().attention_failures == 0
