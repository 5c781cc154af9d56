"""The study lifecycle and its launch gates, through the services the admin and the terminal call."""

import pytest

from studies.models import Response, Study, StudySituation
from studies.services import (
    StudyCreateError,
    StudyLaunchError,
    StudyStateError,
    study_close,
    study_create,
    study_launch,
    study_launch_problems,
    study_pause,
    study_resume,
)
from tests.concurrency import race
from tests.factories import ConditionFactory, SituationFactory, StudyFactory
from tests.studies.test_design import ready_study  # a draft that passes every launch check

pytestmark = pytest.mark.django_db


def test_a_ready_draft_goes_live_then_paused_live_and_closed():
    study = ready_study()
    assert study_launch_problems(study=study) == []
    study_launch(study=study)
    assert study.state == "live" and study.launched_at is not None
    study_pause(study=study)
    assert Study.objects.get(pk=study.pk).state == "paused"
    study_resume(study=study)
    assert Study.objects.get(pk=study.pk).state == "live"
    study_close(study=study)
    study.refresh_from_db()
    assert study.state == "closed" and study.closed_at is not None


def test_a_paused_study_can_be_closed():
    study = ready_study(state=Study.State.PAUSED)
    study_close(study=study)
    assert Study.objects.get(pk=study.pk).state == "closed"


@pytest.mark.parametrize(
    ("state", "action", "message"),
    [
        ("live", study_launch, "cannot launch study '.*': it is live, not draft"),
        ("closed", study_launch, "it is closed, not draft"),
        ("draft", study_pause, "cannot pause study '.*': it is draft, not live"),
        ("paused", study_pause, "it is paused, not live"),
        ("live", study_resume, "cannot resume study '.*': it is live, not paused"),
        ("draft", study_close, "cannot close study '.*': it is draft, not live or paused"),
        ("closed", study_close, "it is closed, not live or paused"),
        ("closed", study_resume, "it is closed, not paused"),
    ],
)
def test_a_transition_from_the_wrong_state_is_refused(state, action, message):
    study = ready_study(state=state)
    with pytest.raises(StudyStateError, match=message):
        action(study=study)
    assert Study.objects.get(pk=study.pk).state == state


def test_a_stale_object_cannot_close_twice():
    study = ready_study(state=Study.State.LIVE)
    stale = Study.objects.get(pk=study.pk)
    study_close(study=study)
    with pytest.raises(StudyStateError, match="it is closed"):
        study_close(study=stale)


def test_launch_names_the_condition_and_how_many_responses_are_missing():
    study = ready_study()
    gpt = study.conditions.get(name="gpt4")
    Response.objects.filter(condition=gpt).first().delete()
    Response.objects.filter(condition=gpt).first().delete()
    with pytest.raises(StudyLaunchError) as excinfo:
        study_launch(study=study)
    assert excinfo.value.problems == [
        "condition 'gpt4' has no response for 2 of 4 prompts (generate or import them)"
    ]
    assert Study.objects.get(pk=study.pk).state == "draft"


def test_only_the_first_sample_counts_as_the_response():
    study = ready_study()
    gpt = study.conditions.get(name="gpt4")
    response = Response.objects.filter(condition=gpt).first()
    Response.objects.create(prompt=response.prompt, condition=gpt, sample_index=1, text="another sample")
    response.delete()
    assert study_launch_problems(study=study) == [
        "condition 'gpt4' has no response for 1 of 4 prompts (generate or import them)"
    ]


def test_launch_gates_list_every_problem():
    study = ready_study(completion_code="", items_per_participant=10, consent_text=" ", instructions_text="")
    study.conditions.update(enrolling=False)
    Response.objects.filter(condition__name="human").update(review=Response.Review.FLAGGED)
    problems = study_launch_problems(study=study)
    assert problems == [
        "no condition is enrolling participants: add one or switch one on",
        "the consent text is empty: write what participants agree to",
        "the completion code is not set",
        "the instructions are empty: say what participants rate and how",
        "the study has 4 prompts but each participant rates 10: import a corpus or lower items per participant",
        "condition 'human' has 4 responses flagged for review: approve, edit or replace them",
    ]


def test_an_approved_response_does_not_block_launch():
    study = ready_study()
    Response.objects.filter(condition__name="human").update(review=Response.Review.APPROVED)
    study_launch(study=study)
    assert study.state == "live"


def test_a_questionnaire_study_needs_an_instrument_and_a_situation_not_prompts():
    from studies.models import Instrument, QuestionnaireSettings

    study = StudyFactory(kind=Study.Kind.QUESTIONNAIRE, items_per_participant=1)
    ConditionFactory(study=study, name="human")
    assert study_launch_problems(study=study) == [
        "a questionnaire study needs an instrument",
        "a questionnaire study needs at least one situation",
    ]
    QuestionnaireSettings.objects.create(study=study, instrument=Instrument.objects.create(name="PANAS-test"))
    StudySituation.objects.create(study=study, situation=SituationFactory())
    study_launch(study=study)
    assert study.state == "live"


@pytest.mark.django_db(transaction=True)
def test_two_admins_launching_at_once_launch_once(requires_postgres):
    study = ready_study()
    launched, refused = race(lambda i: study_launch(study=Study.objects.get(pk=study.pk)), 8)
    assert len(launched) == 1
    assert len(refused) == 7 and all(isinstance(error, StudyStateError) for error in refused.values())


@pytest.mark.django_db(transaction=True)
def test_two_researchers_creating_the_same_study_at_once_create_it_once(requires_postgres):
    created, refused = race(
        lambda i: study_create(slug="same", title="Same", kind="rating", platform="none"), 8
    )
    assert len(created) == 1
    assert [type(error) for error in refused.values()] == [StudyCreateError] * 7
    assert {str(error) for error in refused.values()} == {
        "a study 'same' already exists: choose another short name"
    }
    assert Study.objects.filter(slug="same").count() == 1
