"""study_status on a known fixture, through the selector and the management command."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from kinds.rating.models import Rating
from studies.balance_counts import counts_rebuild
from studies.models import Assignment, Participant
from studies.selectors import study_status
from tests.factories import (
    AttentionCheckFactory,
    ConditionFactory,
    ParticipantFactory,
    PromptFactory,
    ResponseFactory,
    StudyFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def known_study():
    """human: 3 responses rated 2, 1, 0 times; gpt4: 3 responses, none rated. Participants of every status,
    one staff preview (never counted) and one screened out before getting a condition."""
    study = StudyFactory(slug="known", title="Known")
    human = ConditionFactory(study=study, name="human", is_baseline=True, position=0)
    gpt = ConditionFactory(study=study, name="gpt4", kind="llm", position=1)
    responses = {}
    for i in range(3):
        prompt = PromptFactory(study=study)
        responses[i] = ResponseFactory(prompt=prompt, condition=human)
        ResponseFactory(prompt=prompt, condition=gpt)

    def rate(participant, response, position, value):
        a = Assignment.objects.create(participant=participant, position=position, response=response)
        Rating.objects.create(assignment=a, value=value)

    done1 = ParticipantFactory(study=study, condition=human, status=Participant.Status.COMPLETED)
    done2 = ParticipantFactory(study=study, condition=human, status=Participant.Status.COMPLETED)
    rate(done1, responses[0], 0, 3)
    rate(done1, responses[1], 1, 2)
    rate(done2, responses[0], 0, 1)
    ParticipantFactory(study=study, condition=human, status=Participant.Status.ACTIVE)
    ParticipantFactory(study=study, condition=human, status=Participant.Status.RETURNED)
    ParticipantFactory(study=study, condition=gpt, status=Participant.Status.TIMED_OUT)
    ParticipantFactory(
        study=study, condition=gpt, status=Participant.Status.EXCLUDED, flagged_for_exclusion=True
    )
    ParticipantFactory(study=study, condition=None, status=Participant.Status.SCREENED_OUT)
    preview = ParticipantFactory(
        study=study, condition=human, is_preview=True, status=Participant.Status.COMPLETED
    )
    rate(preview, responses[2], 0, 3)
    counts_rebuild(study)  # rows written here, not by enrolment: the running totals counted from them
    return study


def test_status_counts_per_condition(known_study, django_assert_max_num_queries):
    with django_assert_max_num_queries(8):
        status = study_status(study=known_study)
    human, gpt = status["conditions"]
    assert human["name"] == "human" and human["is_baseline"]
    assert human["responses"] == 3
    assert human["participants"] == {
        "active": 1,
        "completed": 2,
        "returned": 1,
        "timed_out": 0,
        "screened_out": 0,
        "excluded": 0,
    }
    assert human["ratings"] == 3  # the preview's rating is not counted
    assert human["ratings_per_response"] == {
        "min": 0,
        "max": 2,
        "mean": 1.0,
        "histogram": {"0": 1, "1": 1, "2": 1},
    }
    assert gpt["participants"]["timed_out"] == 1 and gpt["participants"]["excluded"] == 1
    assert gpt["flagged_for_exclusion"] == 1
    assert gpt["ratings"] == 0
    assert gpt["ratings_per_response"] == {"min": 0, "max": 0, "mean": 0.0, "histogram": {"0": 3}}
    assert status["participants_without_condition"]["screened_out"] == 1
    assert status["totals"]["participants"]["completed"] == 2
    assert status["totals"]["ratings"] == 3
    assert status["prompts"] == 3


def test_the_query_count_does_not_grow_with_the_study(known_study, django_assert_max_num_queries):
    for i in range(5):
        ConditionFactory(study=known_study, name=f"extra{i}", position=10 + i)
    with django_assert_max_num_queries(8):
        study_status(study=known_study)


def test_the_command_prints_a_table(known_study):
    out = io.StringIO()
    call_command("study_status", "known", stdout=out)
    text = out.getvalue()
    assert "Known (known): live" in text or "Known (known): draft" in text
    human_line = next(line for line in text.splitlines() if line.startswith("human"))
    header = next(line for line in text.splitlines() if line.startswith("condition")).split()
    assert header[header.index("excluded") + 1 : header.index("excluded") + 3] == ["flagged", "authenticity"]
    # condition, participants by status, flagged, authenticity flags, then the rating kind's columns: responses,
    # ratings, min/max/mean ratings per response
    assert human_line.split() == [
        "human", "*", "1", "2", "1", "0", "0", "0", "0", "0", "3", "3", "0", "2", "1.00"
    ]  # fmt: skip
    gpt_line = next(line for line in text.splitlines() if line.startswith("gpt4"))
    assert gpt_line.split()[header.index("flagged")] == "1"  # the excluded participant, flagged
    total_line = next(line for line in text.splitlines() if line.startswith("total"))
    assert total_line.split()[header.index("flagged")] == "1"


def test_answers_to_attention_check_pages_are_not_counted_as_ratings(known_study):
    human = known_study.conditions.get(name="human")
    participant = Participant.objects.filter(study=known_study, condition=human, status="completed").first()
    check = AttentionCheckFactory(study=known_study)
    page = Assignment.objects.create(
        participant=participant, position=5, kind=Assignment.Kind.ATTENTION, attention_check=check
    )
    Rating.objects.create(assignment=page, value=2)
    status = study_status(study=known_study)
    assert status["conditions"][0]["ratings"] == 3 and status["totals"]["ratings"] == 3
    assert status["totals"]["flagged_for_exclusion"] == 1


def test_the_command_prints_json(known_study):
    out = io.StringIO()
    call_command("study_status", "known", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data == json.loads(json.dumps(study_status(study=known_study)))
    assert data["conditions"][0]["ratings"] == 3


def test_an_unknown_study_is_an_error():
    with pytest.raises(CommandError, match="no study with slug 'nope'"):
        call_command("study_status", "nope")


def test_completed_questionnaire_runs_are_counted_without_previews(known_study):
    from django.utils import timezone

    from studies.models import QuestionnaireRun

    known_study.kind = "questionnaire"  # runs are the questionnaire kind's numbers
    known_study.save(update_fields=["kind"])
    human, gpt = known_study.conditions.order_by("position")
    done = Participant.objects.filter(study=known_study, condition=human, status="completed").first()
    preview = Participant.objects.get(study=known_study, is_preview=True)
    now = timezone.now()
    common = {"study": known_study, "phase": "default", "source": "participant"}
    QuestionnaireRun.objects.create(
        condition=human, participant=done, subject_key="p1", completed_at=now, **common
    )
    QuestionnaireRun.objects.create(
        condition=human, participant=preview, subject_key="pv", completed_at=now, **common
    )
    QuestionnaireRun.objects.create(condition=human, subject_key="unfinished", **common)
    for i in range(3):
        QuestionnaireRun.objects.create(
            study=known_study,
            condition=gpt,
            subject_key="model",
            phase="default",
            source="llm",
            run_index=i,
            completed_at=now,
        )
    status = study_status(study=known_study)
    assert [c["questionnaire_runs"] for c in status["conditions"]] == [1, 3]


def test_a_questionnaire_study_table_has_a_runs_column():
    from studies.models import Study

    study = StudyFactory(slug="panas", kind=Study.Kind.QUESTIONNAIRE)
    ConditionFactory(study=study, name="human")
    out = io.StringIO()
    call_command("study_status", "panas", stdout=out)
    header = next(line for line in out.getvalue().splitlines() if line.startswith("condition"))
    assert header.split()[-1] == "runs"
    human_line = next(line for line in out.getvalue().splitlines() if line.startswith("human"))
    assert human_line.split()[-1] == "0"
