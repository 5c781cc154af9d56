"""The two factors under a rush: 60 arrivals at once on separate PostgreSQL connections, in a study with two
sources (an LLM and a person) and three labels; every source × label cell within one of the others."""

from collections import Counter

import pytest

from kinds.chat.models import ChatSettings, Conversation
from studies.models import Condition
from studies.participants import participant_enroll
from studies.services import study_launch
from tests.factories import ConditionFactory, StudyFactory
from tests.studies.test_assignment_races import race

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_source_and_label_stay_balanced_under_a_rush(requires_postgres):
    study = StudyFactory(kind="chat", quota_per_condition=500, instructions_text="")
    ConditionFactory(study=study, name="model", kind=Condition.Kind.LLM)
    ConditionFactory(study=study, name="person", kind=Condition.Kind.HUMAN)
    fallback = ConditionFactory(study=study, name="fallback", kind=Condition.Kind.LLM, enrolling=False)
    ChatSettings.objects.create(
        study=study,
        opening=ChatSettings.Opening.OWN,
        labels=["ai", "person", "none"],
        debrief_text="The label was assigned at random.",
        fallback_condition=fallback,
    )
    study_launch(study=study, dry_run=True)

    results, errors = race(lambda i: participant_enroll(study=study, external_id=f"R{i:03d}"), 60)

    assert not errors, errors
    cells = Counter(Conversation.objects.values_list("condition__name", "label"))
    assert sum(cells.values()) == 60 and len(cells) == 6, cells
    assert max(cells.values()) - min(cells.values()) <= 1, cells
    sources = Counter(Conversation.objects.values_list("condition__name", flat=True))
    assert set(sources) == {"model", "person"}  # the fallback takes no one
