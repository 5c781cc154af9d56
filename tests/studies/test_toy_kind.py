"""A third study kind, defined only here: one StudyKind subclass and one registration, no other code touched.

It proves the spine needs nothing from a kind beyond studies/kinds/base.py: a participant enrols over HTTP, goes
through the shared consent page and the toy's own step, gets the completion code; the study launches with the
spine's checks, and its numbers show in the status counts (selector, command and admin page).
"""

import io
import json

import pytest
from django.core.management import call_command
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from ratings.flow import StepPage
from studies.kinds import StudyKind, kind_named, register, step_choices, unregister
from studies.models import Participant, Study
from studies.participants import participant_advance
from studies.selectors import study_status
from studies.services import study_launch
from tests.factories import ConditionFactory, StudyFactory
from tests.ratings.helpers import current_step, enter, post_step, step_url

pytestmark = pytest.mark.django_db

TOY_STEP = "toy_wave"


def toy_get(request, participant):
    return HttpResponse(
        f'<h1>Wave at the toy</h1><form method="post"><input type="hidden" name="step" value="{TOY_STEP}">'
        '<button name="wave" value="yes">Wave</button></form>'
    )


def toy_post(request, participant):
    if request.POST.get("wave") != "yes":
        return HttpResponse("Please wave.", status=400)
    participant_advance(participant=participant, from_step=TOY_STEP)
    return redirect("ratings:step", slug=participant.study.slug)


TOY_PAGE = StepPage(get=toy_get, post=toy_post)


class ToyKind(StudyKind):
    name = "toy"
    label = "Toy study (wave once)"
    step_labels = {TOY_STEP: "Wave"}
    pages = {TOY_STEP: "tests.studies.test_toy_kind.TOY_PAGE"}
    status_columns = [("waved", "waved")]

    def steps(self, study):
        return [TOY_STEP]

    def assignments_create(self, participant, *, rng, now):
        return []  # nothing to show but the wave

    def status_counts(self, study, conditions):
        per = {c.pk: {"waved": 0} for c in conditions}
        for condition_id in Participant.objects.filter(
            study=study, status=Participant.Status.COMPLETED, is_preview=False
        ).values_list("condition_id", flat=True):
            per[condition_id]["waved"] += 1
        return per

    def status_totals(self, study, per_condition):
        return {"waved": sum(row["waved"] for row in per_condition.values())}


@pytest.fixture
def toy_kind():
    kind = register(ToyKind())
    yield kind
    unregister(kind.name)


@pytest.fixture
def toy_study(toy_kind):
    study = StudyFactory(slug="toy", kind="toy", completion_code="TOYDONE", quota_per_condition=5)
    ConditionFactory(study=study, name="only")
    return study


def test_the_toy_kind_is_registered_beside_the_built_in_ones(toy_kind):
    assert kind_named("toy") is toy_kind
    assert {"rating", "questionnaire", "toy"} <= {name for name, _ in Study._meta.get_field("kind").choices}
    assert (TOY_STEP, "Wave") in step_choices()
    assert ("q_evoked", "Questionnaire (after the situation)") in Participant._meta.get_field("step").choices


def test_a_participant_enrols_waves_and_gets_the_code_over_http(client, toy_study):
    study_launch(study=toy_study)
    page = enter(client, toy_study, "TOY1").content.decode()
    assert "Information and consent" in page  # the spine's consent page, shared by every kind
    assert post_step(client, toy_study, decision="agree").status_code == 302
    step, response = current_step(client, toy_study)
    assert step == TOY_STEP and "Wave at the toy" in response.content.decode()
    assert client.post(step_url(toy_study), {"step": TOY_STEP}).status_code == 400  # the toy's own check
    assert client.post(step_url(toy_study), {"step": TOY_STEP, "wave": "yes"}).status_code == 302
    assert "TOYDONE" in client.get(step_url(toy_study)).content.decode()
    participant = Participant.objects.get(external_id="TOY1")
    assert (participant.status, participant.step, participant.completion_code) == (
        "completed",
        "done",
        "TOYDONE",
    )
    # A second wave (back button) finds the participant elsewhere: nothing changes.
    assert client.post(step_url(toy_study), {"step": TOY_STEP, "wave": "yes"}).status_code == 302
    participant.refresh_from_db()
    assert participant.status == "completed"


def test_the_toy_study_shows_its_own_numbers_in_the_status_counts(client, toy_study, admin_client):
    study_launch(study=toy_study)
    for pid in ("A", "B"):
        visitor = client.__class__()
        enter(visitor, toy_study, pid)
        post_step(visitor, toy_study, decision="agree")
        visitor.post(step_url(toy_study), {"step": TOY_STEP, "wave": "yes"})
    status = study_status(study=toy_study)
    assert status["columns"] == [{"key": "waved", "header": "waved"}]
    assert status["conditions"][0]["waved"] == 2 and status["totals"]["waved"] == 2
    out = io.StringIO()
    call_command("study_status", "toy", stdout=out)
    header = next(line for line in out.getvalue().splitlines() if line.startswith("condition"))
    assert header.split()[-1] == "waved"
    out = io.StringIO()
    call_command("study_status", "toy", "--json", stdout=out)
    assert json.loads(out.getvalue())["conditions"][0]["waved"] == 2
    page = admin_client.get(reverse("admin:studies_study_status", args=[toy_study.pk])).content.decode()
    assert "Waved" in page
