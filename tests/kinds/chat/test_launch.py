"""Launch checks of a chat study: a label that can mislead ("a person" on an LLM's replies, the fallback's
included; "an AI" on a person's) is refused without a debrief text; with one, the study launches and its
participants read the debrief after the rating. The pre-registration declares both factors, PETS, the scale and
the planned analysis."""

import pytest

from kinds.chat.kind import CHAT, DEBRIEF, misleading_cells
from kinds.chat.models import ChatSettings
from studies.models import Condition
from studies.services import StudyLaunchError, study_launch
from tests.factories import ConditionFactory, StudyFactory

pytestmark = pytest.mark.django_db


def _study(*, labels, kinds, debrief=""):
    study = StudyFactory(kind="chat", instructions_text="")
    for i, kind in enumerate(kinds):
        ConditionFactory(study=study, name=f"c{i}", kind=kind)
    fallback = ConditionFactory(study=study, name="fallback", kind=Condition.Kind.LLM, enrolling=False)
    ChatSettings.objects.create(
        study=study, opening="own", labels=labels, debrief_text=debrief, fallback_condition=fallback
    )
    return study


@pytest.mark.parametrize(
    "labels, kinds",
    [
        (["person"], [Condition.Kind.LLM]),
        (["ai", "none"], [Condition.Kind.HUMAN]),
        (
            ["person", "none"],
            [Condition.Kind.HUMAN],
        ),  # the fallback model can answer a "person"-labelled chat
    ],
)
def test_a_misleading_label_without_a_debrief_is_refused_at_launch(labels, kinds):
    study = _study(labels=labels, kinds=kinds)
    with pytest.raises(StudyLaunchError) as refused:
        study_launch(study=study, dry_run=True)
    assert "debrief" in str(refused.value)
    study.refresh_from_db()
    assert study.state == "draft"


def test_with_a_debrief_it_launches_and_the_debrief_follows_the_rating():
    study = _study(labels=["ai", "person"], kinds=[Condition.Kind.LLM], debrief="The label was random.")
    assert misleading_cells(study) and CHAT.steps(study)[-1] == DEBRIEF
    study_launch(study=study, dry_run=True)
    study.refresh_from_db()
    assert study.state == "live"


def test_a_truthful_design_needs_no_debrief():
    study = StudyFactory(kind="chat", instructions_text="")
    ConditionFactory(study=study, name="model", kind=Condition.Kind.LLM)
    ChatSettings.objects.create(study=study, opening="own", labels=["ai", "none"])
    assert misleading_cells(study) == [] and DEBRIEF not in CHAT.steps(study)
    study_launch(study=study, dry_run=True)


def test_a_corpus_opening_needs_situations_and_a_person_source_a_fallback():
    study = StudyFactory(kind="chat", instructions_text="")
    ConditionFactory(study=study, name="person", kind=Condition.Kind.HUMAN)
    ChatSettings.objects.create(study=study, opening="corpus", labels=["person"])
    problems = " ".join(
        p.text if hasattr(p, "text") else p for p in CHAT.launch_problems(study, list(study.conditions.all()))
    )
    assert "situations" in problems and "fallback" in problems


def test_the_preregistration_declares_both_factors_pets_the_scale_and_the_analysis():
    study = _study(labels=["ai", "person"], kinds=[Condition.Kind.LLM], debrief="Random labels.")
    lines = " ".join(CHAT.prereg_procedure(study, {}))
    assert "source" in lines and "label shown" in lines and "an AI, a person" in lines
    assert "PETS" in lines and "Emotional Responsiveness" in lines and "Understanding & Trust" in lines
    assert "Good / Okay / Bad" in lines
    # the primary test the analysis reports first (kinds/chat/analysis.py)
    assert CHAT.analysis_plan.primary.key == "interaction"
