"""What a finished participant's answers show (studies/authenticity_answers.py through the rating kind's
`answer_review`, kinds/rating/answer_review.py): read once when they finish, with JavaScript or without."""

import pytest
from django.test import Client

from generation.judge_models import Judge, JudgeRating
from generation.models import Provider
from studies.models import Assignment, ParticipantAuthenticity, Response
from tests.factories import rating_study_build
from tests.ratings.helpers import consent_and_instructions, current_position, enter, step_url

pytestmark = pytest.mark.django_db


def test_answers_copying_the_judges_are_scored_when_a_plain_poster_finishes():
    study = rating_study_build(conditions=1, prompts=8, items_per_participant=8)
    judge = Judge.objects.create(
        study=study, name="judge", provider=Provider.objects.create(name="p"), model="m"
    )
    values = [option["value"] for option in study.scale]
    judged = {}
    for i, response in enumerate(Response.objects.filter(condition__study=study)):
        judged[response.pk] = values[i % len(values)]
        JudgeRating.objects.create(
            judge=judge, response=response, status=JudgeRating.Status.DONE, value=judged[response.pk]
        )
    client = Client()
    enter(client, study, "COPIER")
    consent_and_instructions(client, study)
    while (position := current_position(client, study)) is not None:
        page = Assignment.objects.get(participant__external_id="COPIER", position=position)
        client.post(
            step_url(study), {"step": "items", "position": position, "value": judged[page.response_id]}
        )
    row = ParticipantAuthenticity.objects.get(participant__external_id="COPIER")
    assert row.answers["kappa"] == 1.0 and row.answers["judged"] == 8 and row.answers["timed"] == 8
    assert any(
        reason.startswith("agrees with the study's LLM judges at kappa 1.00") for reason in row.reasons
    )
    assert row.score is not None  # no signals, yet scored on what the answers show


def test_the_review_reads_each_page_once_with_the_median_of_this_study_s_finished_judge_ratings():
    """Three judges of the study (the median counts), a judge of another study, a pending rating and a pairwise
    verdict on the same responses (none of which counts), and pages with no judge rating at all."""
    from kinds.rating.answer_review import rating_answer_review
    from studies.models import Participant

    study = rating_study_build(conditions=1, prompts=8, items_per_participant=8)
    other = rating_study_build(conditions=1, prompts=1, items_per_participant=1)
    provider = Provider.objects.create(name="p")
    judges = [Judge.objects.create(study=study, name=f"j{i}", provider=provider, model="m") for i in range(3)]
    stranger = Judge.objects.create(study=other, name="other", provider=provider, model="m")
    responses = list(Response.objects.filter(condition__study=study).order_by("pk"))
    values = [option["value"] for option in study.scale]
    expected_median = {}
    for i, response in enumerate(responses[:5]):  # the last three responses have no judge rating
        given = [values[(i + k) % len(values)] for k in range(3)]
        for judge, value in zip(judges, given, strict=True):
            JudgeRating.objects.create(
                judge=judge, response=response, status=JudgeRating.Status.DONE, value=value
            )
        expected_median[response.pk] = sorted(given)[1]
        JudgeRating.objects.create(
            judge=stranger, response=response, status=JudgeRating.Status.DONE, value=99
        )
        JudgeRating.objects.create(
            judge=judges[0], response=response, sample_index=1, status=JudgeRating.Status.PENDING, value=98
        )
        JudgeRating.objects.create(
            judge=judges[1], response=response, versus=responses[-1], status=JudgeRating.Status.DONE, value=97
        )
    client = Client()
    enter(client, study, "READER")
    consent_and_instructions(client, study)
    while (position := current_position(client, study)) is not None:
        client.post(step_url(study), {"step": "items", "position": position, "value": values[0]})
    participant = Participant.objects.get(external_id="READER")
    timed, judged = rating_answer_review(participant)
    pages = Assignment.objects.filter(participant=participant, kind=Assignment.Kind.RESPONSE).order_by(
        "position"
    )
    assert len(timed) == pages.count() == 8
    assert all(words > 0 and ms >= 0 for words, ms in timed)
    assert judged == [
        (values[0], expected_median[page.response_id])
        for page in pages
        if page.response_id in expected_median
    ]
    assert len(judged) == 5
