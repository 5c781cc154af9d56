"""The pages before the rating items (consent, instructions, the TEQ) say where the participant is: "Step n of
N" with a progress bar, counting up page by page."""

import re

import pytest

from tests.factories import rating_study_build
from tests.ratings.helpers import current_step, enter, post_step

pytestmark = pytest.mark.django_db

STEP = re.compile(r"Step (\d+) of (\d+)")


def test_consent_instructions_and_the_teq_show_the_step_and_the_total(client):
    study = rating_study_build(conditions=1, prompts=4, items_per_participant=2, ask_teq=True)
    enter(client, study, "PID-steps")
    seen = []
    for step, answer in (("consent", {"decision": "agree"}), ("instructions", {}), ("teq", None)):
        shown, response = current_step(client, study)
        page = response.content.decode()
        assert shown == step
        match = STEP.search(page)
        assert match, f"{step}: no step progress"
        assert '<progress max="' in page
        seen.append((int(match.group(1)), int(match.group(2))))
        if answer is not None:
            assert post_step(client, study, **answer).status_code == 302
    numbers = [n for n, _ in seen]
    totals = {total for _, total in seen}
    assert numbers == [1, 2, 3] and len(totals) == 1 and totals.pop() >= 4  # consent … items … done
