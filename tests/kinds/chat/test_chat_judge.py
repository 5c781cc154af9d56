"""An LLM judge rates the chat study's transcripts on its scale, and is calibrated against the participants."""

import numpy as np
import pytest
from statsmodels.stats.inter_rater import cohens_kappa

from generation.judge_formats import judge_format_of
from generation.models import JudgeRating
from generation.services.judging import judge_render
from kinds.chat.judge_analysis import judge_calibrations, weighted_kappa
from kinds.chat.judge_format import TRANSCRIPTS, transcript_responses
from kinds.chat.models import ChatRating, Conversation
from studies.models import Emotion, Prompt, Response
from tests.analysis.judge_builders import judge_create
from tests.kinds.chat.test_chat_analysis_exports import _rows, chat_study

pytestmark = pytest.mark.django_db


def test_weighted_kappa_matches_statsmodels():
    a = [0, 0, 1, 1, 2, 2, 2, 1, 0, 2]
    b = [0, 1, 1, 2, 2, 0, 2, 1, 0, 1]
    table = np.zeros((3, 3))
    for x, y in zip(a, b, strict=True):
        table[x, y] += 1
    expected = cohens_kappa(table, wt="quadratic").kappa
    assert weighted_kappa(a, b, [0, 1, 2]) == pytest.approx(expected)
    assert weighted_kappa(a, a, [0, 1, 2]) == pytest.approx(1.0)


def test_the_judge_reads_each_transcript_without_the_label_and_answers_on_the_studys_scale():
    study = chat_study(2)
    assert judge_format_of(study) is TRANSCRIPTS
    units = TRANSCRIPTS.units(study=study)
    assert len(units) == 8 and TRANSCRIPTS.units(study=study) == units  # written once
    assert Response.objects.filter(prompt__study=study).count() == 8
    judge = judge_create(study)
    judge.rubric = TRANSCRIPTS.default_rubric
    judge.save()
    conversation = Conversation.objects.filter(participant__study=study).first()
    response = Response.objects.get(pk=transcript_responses(study)[conversation.pk])
    _, messages = judge_render(judge=judge, response=response)
    text = messages[0]["content"]
    assert f"Person: {conversation.participant.external_id} says 0" in text
    assert f"Partner: {conversation.participant.external_id} says 1" in text
    assert (
        "Good, Okay, Bad" in text
        and "an AI" not in text
        and "a person" not in text.replace("A person talked", "")
    )
    assert TRANSCRIPTS.read("**Okay**", study=study) == (1, None)
    assert TRANSCRIPTS.problems(study) == []


def test_calibration_against_the_participants_answers(staff_client):
    study = chat_study(3)
    judge = judge_create(study)
    by_conversation = transcript_responses(study)
    ratings = list(ChatRating.objects.filter(conversation__participant__study=study).order_by("pk"))
    for i, rating in enumerate(ratings):
        value = rating.scale_value if i % 3 else (rating.scale_value + 1) % 3  # two in three agree
        JudgeRating.objects.create(
            judge=judge, response_id=by_conversation[rating.conversation_id], sample_index=0,
            status=JudgeRating.Status.DONE, value=value,
        )  # fmt: skip
    (calibration,) = judge_calibrations(study)
    assert calibration["conversations"] == 12
    assert calibration["agreement"] == pytest.approx(8 / 12, abs=0.001)
    assert {row["source"] for row in calibration["by_source"]} == {"gpt", "person"}
    page = staff_client.get(f"/analysis/{study.slug}/chat/").content.decode()
    assert "LLM judges against the participants" in page and judge.name in page


def test_the_transcripts_the_judge_reads_are_not_in_the_responses_export():
    """A judge's input is not a response shown to participants: the responses export lists what participants may
    be shown, so the transcripts stay out of it (and a response of the study's stimuli stays in)."""
    study = chat_study(1)
    shown = Response.objects.create(
        prompt=Prompt.objects.create(study=study, dialogue_id="d1", emotion=Emotion.objects.get_or_create(name="sad")[0],
                                     situation="A loss.", speaker_utterance="My cat died."),
        condition=study.conditions.get(name="gpt"), text="I am sorry about your cat.",
    )  # fmt: skip
    written = transcript_responses(study)
    assert len(written) == 4
    assert [int(row["response_id"]) for row in _rows(study, "responses")] == [shown.pk]
    assert set(Response.objects.filter(pk__in=written.values()).values_list("source", flat=True)) == {
        Response.Source.JUDGE_INPUT
    }
