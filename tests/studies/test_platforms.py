"""Recruiting platforms are one interface (studies/platforms/): a new platform is one class and one
registration, and the entry, the outcome pages, the launch check and the admin follow it; the data migration
moves MTurk's own columns into the platform fields."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.urls import reverse

from studies.models import Participant
from studies.platforms import (
    Completion,
    RecruitingPlatform,
    SubmitForm,
    platform_choices,
    register,
    registered_platforms,
    unregister,
)
from studies.services import study_launch_problems
from tests.factories import rating_study_build
from tests.ratings.helpers import answer_current, consent_and_instructions, step_url

pytestmark = pytest.mark.django_db


class Toy(RecruitingPlatform):
    """A platform no file of the site names: its parameters, its hand-back form and its admin link."""

    name = "toy"
    label = "Toy panel"
    site_name = "the Toy panel"
    participant_parameter = "toy_person"
    study_parameter = "toy_study"
    session_parameter = "toy_visit"
    other_parameters = ("toy_lang",)
    returned_text = "Tell the Toy panel you stopped."
    link_query = "toy_person=[PERSON]&toy_study=[STUDY]&toy_visit=[VISIT]"
    link_instructions = "the Toy panel's survey field"

    def platform_data(self, query):
        return {"lang": query.get("toy_lang", "")}

    def is_preview(self, query):
        return query.get("toy_visit") == "peek"

    def completion(self, participant, code, redirect_url):
        return Completion(
            submit_form=SubmitForm(
                action="https://toy.example/done",
                fields={"visit": participant.platform_session_id, "code": code},
                button="Hand it back to the Toy panel",
            )
        )


@pytest.fixture
def toy():
    platform = register(Toy())
    yield platform
    unregister(platform.name)


def _finish(client, study):
    for _ in range(50):
        position, _response = answer_current(client, study, 3)
        if position is None:
            return


def test_the_built_in_platforms_are_registered():
    assert {p.name for p in registered_platforms()} >= {"prolific", "mturk", "none"}
    assert ("none", "None (direct link)") in platform_choices()


def test_a_new_platform_is_one_class_and_one_registration(toy, staff_client):
    study = rating_study_build(conditions=1, prompts=4, items_per_participant=2, platform="toy")
    study.full_clean()  # the registered platform is a valid choice of Study.platform
    client = Client()

    preview = client.get(f"/s/{study.slug}/", {"toy_person": "T1", "toy_visit": "peek"})
    assert preview.status_code == 200 and not Participant.objects.exists()

    query = {"toy_person": "T1", "toy_study": "S9", "toy_visit": "V1", "toy_lang": "nl"}
    assert client.get(f"/s/{study.slug}/", query).status_code == 200
    stored = Participant.objects.values(
        "platform", "external_id", "platform_study_id", "platform_session_id", "platform_data"
    ).get()
    assert list(stored.values()) == ["toy", "T1", "S9", "V1", {"lang": "nl"}]

    # Resuming in another browser needs the platform's id of this attempt.
    assert Client().get(f"/s/{study.slug}/", {**query, "toy_visit": "V2"}).status_code == 409

    consent_and_instructions(client, study)
    _finish(client, study)
    page = client.get(step_url(study)).content.decode()
    assert 'action="https://toy.example/done"' in page
    assert 'name="visit" value="V1"' in page and "Hand it back to the Toy panel" in page

    change = staff_client.get(reverse("admin:studies_study_change", args=[study.pk])).content.decode()
    assert f"http://testserver/s/{study.slug}/?toy_person=[PERSON]&amp;toy_study=[STUDY]" in change
    assert "the Toy panel&#x27;s survey field" in change


def test_a_link_naming_people_of_two_platforms_is_refused(toy):
    study = rating_study_build(conditions=1, prompts=4, items_per_participant=2)
    response = Client().get(f"/s/{study.slug}/", {"PROLIFIC_PID": "P1", "toy_person": "T1"})
    assert response.status_code == 400 and not Participant.objects.exists()


def test_a_returned_participant_is_told_what_their_platform_wants(toy):
    study = rating_study_build(conditions=1, prompts=4, items_per_participant=2, platform="toy")
    client = Client()
    client.get(f"/s/{study.slug}/", {"toy_person": "T1", "toy_visit": "V1"})
    client.post(f"/s/{study.slug}/return/")
    assert Participant.objects.get().status == Participant.Status.RETURNED
    assert "Tell the Toy panel you stopped." in client.get(step_url(study)).content.decode()


def test_launch_asks_the_platform_whether_a_completion_code_is_needed(toy):
    def problems(platform):
        study = rating_study_build(conditions=1, prompts=4, platform=platform, completion_code="")
        return study_launch_problems(study=study)

    assert "the completion code is not set" not in problems("none")
    assert "the completion code is not set" in problems("prolific")
    assert "the completion code is not set" in problems("toy")


BEFORE = [("studies", "0019_rating_fields_leave_study")]
AFTER = [("studies", "0020_participant_platform_data")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_mturk_ids_move_into_the_platform_fields_and_back(requires_postgres):
    old = _migrate(BEFORE)
    study = old.get_model("studies", "Study").objects.create(slug="moved", title="Moved", kind="rating")
    make = old.get_model("studies", "Participant").objects.create
    make(study=study, external_id="W1", platform="mturk", mturk_assignment_id="A1", mturk_hit_id="H1", seed=1)
    make(
        study=study,
        external_id="P1",
        platform="prolific",
        platform_study_id="S",
        platform_session_id="X",
        seed=2,
    )

    new = _migrate(AFTER)
    moved = {
        p.external_id: (p.platform, p.platform_study_id, p.platform_session_id, p.platform_data)
        for p in new.get_model("studies", "Participant").objects.all()
    }
    assert moved == {"W1": ("mturk", "H1", "A1", {}), "P1": ("prolific", "S", "X", {})}

    back = _migrate(BEFORE)
    worker = back.get_model("studies", "Participant").objects.get(external_id="W1")
    assert (worker.mturk_hit_id, worker.mturk_assignment_id) == ("H1", "A1")
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
