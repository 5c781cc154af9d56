"""Answers under concurrency: the same answer posted at the same instant from many requests of one participant."""

import pytest

from kinds.rating.models import Rating
from studies.models import Participant
from tests.concurrency import race
from tests.factories import rating_study_build
from tests.ratings.helpers import another_tab, at_first_item, current_position, step_url

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_the_same_answer_posted_concurrently_is_stored_exactly_once(requires_postgres):
    study = rating_study_build(conditions=1, prompts=5, items_per_participant=3)
    browser, position = at_first_item(study)

    def post(i):
        tab = another_tab(browser.cookies)  # one tab per thread, all the same participant
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
