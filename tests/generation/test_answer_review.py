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
