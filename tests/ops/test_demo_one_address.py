"""`make run`'s demo takes many participants from one address: a researcher trying the printed link and a few
test ids, or a lab or campus behind one address, is not turned away (a per-address cap is a study's own
choice, and the demo makes none)."""

import io

import pytest
from django.core.management import call_command
from django.test import Client

from studies.models import Participant, Study
from tests.ratings.helpers import answer_current, consent_and_instructions, enter, post_step

pytestmark = pytest.mark.django_db


def test_five_new_ids_from_one_address_each_complete_the_demo(limits_on, tmp_path):
    # the limits `make run` starts with (config/settings.py's defaults), the limiter on
    limits_on.VAR_DIR = tmp_path
    limits_on.RATELIMIT_ENTRY_PER_IP = 30
    limits_on.RATELIMIT_PARTICIPANT = 60
    limits_on.RATELIMIT_ENROLL_PER_STUDY = 10000
    call_command("seed_demo", stdout=io.StringIO())
    study = Study.objects.get(slug="demo")
    assert study.enrollments_per_address is None
    for n in range(5):
        client = Client(REMOTE_ADDR="192.0.2.10")
        assert enter(client, study, f"tryout-{n}").status_code == 200
        consent_and_instructions(client, study)
        assert post_step(client, study, **{f"teq_{i}": "often" for i in range(1, 17)}).status_code == 302
        for _ in range(
            study.items_per_participant + study.attention_checks.count() + study.trap_repeat_items
        ):
            position, response = answer_current(client, study, 2)
            assert position is not None and response.status_code == 302
        assert answer_current(client, study, 2) == (None, None)
        assert "DEMO-COMPLETE" in client.get(f"/s/{study.slug}/step/").content.decode()
    statuses = Participant.objects.filter(study=study, is_preview=False).values_list("status", flat=True)
    assert list(statuses) == [Participant.Status.COMPLETED] * 5
