"""The one answer protocol (studies/answers.py), run against every built-in kind's answer service: the same cases
(a double post, a stale page, a second tab, an attention failure) find the same outcomes and the same reason
text whatever the kind."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from django.core.management import call_command
from django.db import connections

from kinds.pairwise.pages import pair_answer_submit
from kinds.questionnaire.pages import questionnaire_item_order, questionnaire_submit
from kinds.rating.services import rating_submit
from studies import models
from studies.answers import NotCurrentItem, NotYourItem, ParticipantNotActive
from studies.models import Assignment, Participant, QuestionnaireRun
from studies.participants import participant_enroll
from tests.concurrency import race
from tests.emotionbench.conftest import panas_definition, situations_definition
from tests.factories import (
    AttentionCheckFactory,
    pairwise_study_build,
    questionnaire_study_create,
    rating_study_build,
)


@dataclass
class Kind:
    """One kind's answer service seen through the protocol: its pages' positions in order, the position of an
    attention check, an answer (`variant` picks one of two answers; `passes` whether it passes the check) and
    what is stored (position -> the answer's variant)."""

    name: str
    build: object  # (tmp_path) -> a live study whose participants get two attention checks
    answer_step: str

    def enrol(self, study, pid="P1") -> Participant:
        participant = participant_enroll(study=study, external_id=pid)
        Participant.objects.filter(pk=participant.pk).update(step=self.answer_step)
        participant.refresh_from_db()
        return participant


# --- rating ---


def _rating(tmp_path):
    study = rating_study_build(conditions=1, prompts=6, items_per_participant=3)
    for after in (1, 2):
        AttentionCheckFactory(study=study, after_item=after, expected_value=2)
    return study


def _rating_positions(participant):
    return list(participant.assignments.order_by("position").values_list("position", flat=True))


def _rating_check(participant):
    return (
        participant.assignments.filter(kind=Assignment.Kind.ATTENTION).order_by("position").first().position
    )


def _rating_submit(participant, position, variant, passes=True):
    value = [1, 3][variant]
    if participant.assignments.filter(position=position, kind=Assignment.Kind.ATTENTION).exists():
        value = 2 if passes else 3  # its expected value is 2
    return rating_submit(participant=participant, position=position, value=value).created


def _rating_stored(participant):
    answers = participant.assignments.filter(rating__isnull=False).values_list("position", "rating__value")
    return {position: [1, 3].index(value) for position, value in answers}


# --- pairwise ---


def _pairwise(tmp_path):
    return pairwise_study_build(conditions=3, prompts=6, items_per_participant=3, known_answers=(1, 2))


def _pair_positions(participant):
    return list(participant.pair_items.order_by("position").values_list("position", flat=True))


def _pair_check(participant):
    return participant.pair_items.filter(known_answer__isnull=False).order_by("position").first().position


def _pair_submit(participant, position, variant, passes=True):
    item = participant.pair_items.filter(position=position).first()
    choice = ["left", "right"][variant]
    if item is not None and item.known_answer_id is not None:
        good, poor = ("left", "right") if item.good_on_left else ("right", "left")
        choice = good if passes else poor
    return pair_answer_submit(participant=participant, position=position, choice=choice)


def _pair_stored(participant):
    answers = participant.pair_items.filter(answered_at__isnull=False).values_list("position", "choice")
    return {position: ["left", "right"].index(choice) for position, choice in answers}


# --- questionnaire ---

STEPS = ("q_default", "q_evoked")
PHASES = (QuestionnaireRun.Phase.DEFAULT, QuestionnaireRun.Phase.EVOKED)


def _questionnaire(tmp_path):
    (tmp_path / "q.json").write_text(json.dumps([panas_definition()]))
    (tmp_path / "s.json").write_text(json.dumps(situations_definition()))
    call_command("import_instruments", str(tmp_path / "q.json"))
    call_command("import_situations", str(tmp_path / "s.json"))
    study = questionnaire_study_create(
        slug="feelings",
        title="Feelings",
        instrument=models.Instrument.objects.get(name="PANAS"),
        state=models.Study.State.LIVE,
        completion_code="C0MPLETE",
        failed_checks_code="FAILEDCK",
        quota_per_condition=50,
    )
    models.Condition.objects.create(
        study=study, name="human", kind=models.Condition.Kind.HUMAN, is_baseline=True
    )
    models.StudySituation.objects.bulk_create(
        [
            models.StudySituation(study=study, situation=s)
            for s in models.Situation.objects.filter(emotion="Anger")[:2]
        ]
    )
    return study


def _questionnaire_submit(participant, position, variant, passes=True):
    phase, step = (PHASES[position], STEPS[position]) if position < len(STEPS) else (PHASES[0], "q_situation")
    order = questionnaire_item_order(participant=participant, phase=phase)
    return questionnaire_submit(
        participant=participant,
        step=step,
        answers=dict.fromkeys(order, variant + 1),
        check_passed=passes,
    )


def _questionnaire_stored(participant):
    runs = QuestionnaireRun.objects.filter(participant=participant)
    return {PHASES.index(run.phase): run.answers.first().value - 1 for run in runs}


KINDS = {
    "rating": (
        Kind("rating", _rating, "items"),
        _rating_positions,
        _rating_check,
        _rating_submit,
        _rating_stored,
    ),
    "pairwise": (
        Kind("pairwise", _pairwise, "pairs"),
        _pair_positions,
        _pair_check,
        _pair_submit,
        _pair_stored,
    ),
    "questionnaire": (
        Kind("questionnaire", _questionnaire, "q_default"),
        lambda participant: [0, 1],
        lambda participant: 0,
        _questionnaire_submit,
        _questionnaire_stored,
    ),
}


@pytest.fixture(params=sorted(KINDS))
def kind(request, tmp_path):
    kind, positions, check, submit, stored = KINDS[request.param]
    study = kind.build(tmp_path)
    return kind, study, positions, check, submit, stored


def _outcome(call):
    """What a submit did: 'stored', 'already answered', or the refusal's name."""
    try:
        return "stored" if call() else "already answered"
    except (NotCurrentItem, ParticipantNotActive, NotYourItem) as refused:
        return type(refused).__name__


@pytest.mark.django_db
def test_a_double_post_stores_the_first_answer_and_the_second_stores_nothing(kind):
    protocol, study, positions, _check, submit, stored = kind
    participant = protocol.enrol(study)
    first = positions(participant)[0]
    outcomes = [_outcome(lambda v=v: submit(participant, first, v)) for v in (0, 1)]
    assert outcomes == ["stored", "already answered"]
    assert stored(participant) == {first: 0}


@pytest.mark.django_db
def test_a_stale_page_stores_nothing(kind):
    protocol, study, positions, _check, submit, stored = kind
    participant = protocol.enrol(study)
    first, ahead = positions(participant)[:2]
    assert _outcome(lambda: submit(participant, ahead, 0)) == "NotCurrentItem"
    assert _outcome(lambda: submit(participant, 99, 0)) == "NotYourItem"
    Participant.objects.filter(pk=participant.pk).update(step="consent")  # a page of a step not reached
    participant.refresh_from_db()
    assert _outcome(lambda: submit(participant, first, 0)) == "ParticipantNotActive"
    assert stored(participant) == {}


@pytest.mark.django_db
def test_a_failed_attention_check_flags_the_participant_with_one_reason_text(kind):
    protocol, study, positions, check, submit, stored = kind
    participant = protocol.enrol(study)
    for position in positions(participant):
        participant.refresh_from_db()
        if position == check(participant):
            assert submit(participant, position, 0, passes=False)
            break
        Participant.objects.filter(pk=participant.pk).update(step=_step_of(protocol, position))
        participant.refresh_from_db()
        assert submit(participant, position, 0)
    participant.refresh_from_db()
    assert participant.attention_failures == 1 and participant.flagged_for_exclusion
    assert participant.exclusion_reasons == ["attention checks failed: 1 of 2"]


def _step_of(protocol, position):
    return STEPS[position] if protocol.name == "questionnaire" else protocol.answer_step


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_second_tab_posting_the_same_page_at_the_same_instant_stores_one_answer(kind, requires_postgres):
    protocol, study, positions, _check, submit, stored = kind
    participant = protocol.enrol(study)
    first = positions(participant)[0]

    def post(i):
        tab = Participant.objects.select_related("study").get(pk=participant.pk)
        try:
            return submit(tab, first, i % 2)
        finally:
            connections.close_all()

    results, errors = race(post, 6)
    assert not errors and sorted(results.values()) == [False] * 5 + [True]
    assert list(stored(participant)) == [first]
