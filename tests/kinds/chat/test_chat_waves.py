"""A copy or a wave of a chat study takes its design, never the transcripts written for its LLM judges (responses
of source `judge_input` and the `chat:<conversation>` prompts that hold them): they are the parent's conversations,
not material of the new study."""

import pytest

from kinds.chat.judge_format import DIALOGUE_PREFIX, transcript_responses
from studies.design import design_freeze
from studies.models import Prompt, Response
from studies.waves import study_copy, study_extend
from tests.kinds.chat.test_chat_analysis_exports import chat_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def judged_chat():
    study = chat_study(1)
    assert len(transcript_responses(study)) == 4  # the judge's transcripts, written as it asks for them
    design_freeze(study, reason="launch")
    return study


def _judge_inputs(study) -> tuple[int, int]:
    return (
        Response.objects.filter(prompt__study=study, source=Response.Source.JUDGE_INPUT).count(),
        Prompt.objects.filter(study=study, dialogue_id__startswith=DIALOGUE_PREFIX).count(),
    )


def test_a_wave_of_a_chat_study_copies_no_judge_transcript(judged_chat):
    wave = study_extend(parent=judged_chat, new_slug="chat-wave", conditions=["llama"])
    assert _judge_inputs(judged_chat) == (4, 4)  # the parent keeps its own
    assert _judge_inputs(wave) == (0, 0)
    assert set(wave.conditions.values_list("name", flat=True)) == {"gpt_rerate", "llama"}


def test_a_copy_of_a_chat_study_copies_no_judge_transcript(judged_chat):
    copy = study_copy(source=judged_chat, new_slug="chat-copy")
    assert _judge_inputs(copy) == (0, 0)
    assert set(copy.conditions.values_list("name", flat=True)) == {"gpt", "person"}
