"""The chat kind's analysis entry, analysts' page, planned analysis and exports, on a stored study."""

import csv
import io
import random

import pytest
from django.utils import timezone

from analysis.exports import export_lines
from kinds.chat.analysis_plan import CHAT_PLAN
from kinds.chat.exports import CONVERSATION_HEADER, TURN_HEADER
from kinds.chat.models import ChatRating, ChatSettings, Conversation, Turn
from kinds.chat.pets import KEYS, pets_scores
from studies.models import Condition, Participant, Study
from studies.prereg import prereg_markdown
from studies.selectors import study_planned_analysis
from tests.factories import ConditionFactory, ParticipantFactory, StudyFactory

pytestmark = pytest.mark.django_db


def chat_study(per_cell: int, *, seed: int = 1, person_bonus: float = 10.0) -> Study:
    study = StudyFactory(kind="chat")
    ChatSettings.objects.create(study=study, labels=["ai", "none"])
    gpt = ConditionFactory(study=study, name="gpt", kind=Condition.Kind.LLM, is_baseline=True)
    person = ConditionFactory(study=study, name="person", kind=Condition.Kind.HUMAN)
    rng = random.Random(seed)
    now = timezone.now()
    for condition in (gpt, person):
        for label in ("ai", "none"):
            for _ in range(per_cell):
                p = ParticipantFactory(study=study, condition=condition, status=Participant.Status.COMPLETED)
                c = Conversation.objects.create(
                    participant=p, condition=condition, label=label, state="ended"
                )
                for index in range(4):
                    role = "participant" if index % 2 == 0 else "responder"
                    Turn.objects.create(
                        conversation=c, index=index, role=role, text=f"{p.external_id} says {index}",
                        condition=condition if role == "responder" else None, sent_at=now,
                        model="loopback" if role == "responder" else "", settings={"temperature": 0.7} if role == "responder" else {},
                    )  # fmt: skip
                bonus = person_bonus if condition == person else 0
                answers = {k: max(0, min(100, round(rng.gauss(55 + bonus, 15)))) for k in KEYS}
                scores = pets_scores(answers)
                ChatRating.objects.create(
                    conversation=c, pets=answers, pets_order=list(KEYS), pets_er=scores["er"], pets_ut=scores["ut"],
                    scale_value=rng.choice([0, 1, 2]),
                )  # fmt: skip
    return study


def _rows(study, what):
    return list(csv.DictReader(io.StringIO("".join(export_lines(study=study, what=what)))))


def test_conversation_export_has_every_pets_answer_and_the_scale():
    study = chat_study(2)
    rows = _rows(study, "ratings")
    assert list(rows[0]) == CONVERSATION_HEADER
    assert len(rows) == 8
    for row in rows:
        rating = ChatRating.objects.get(conversation_id=int(row["conversation"]))
        assert [int(row[f"pets_{k}"]) for k in KEYS] == [rating.pets[k] for k in KEYS]
        assert float(row["pets_er"]) == pytest.approx(rating.pets_er)
        assert row["scale_label"] == {2: "Good", 1: "Okay", 0: "Bad"}[rating.scale_value]
        assert row["source"] in {"gpt", "person"} and row["label"] in {"ai", "none"}


def test_transcript_export_is_exactly_the_stored_turns():
    study = chat_study(1)
    rows = _rows(study, "transcript")
    assert list(rows[0]) == TURN_HEADER
    stored = list(
        Turn.objects.filter(conversation__participant__study=study)
        .order_by("conversation__created_at", "conversation_id", "index")
        .values_list("text", "role", "index")
    )
    assert [(r["text"], r["role"], int(r["index"])) for r in rows] == stored
    assert {r["settings"] for r in rows if r["role"] == "responder"} == {'{"temperature": 0.7}'}


def test_analysis_page_shows_the_headline_and_warns_on_too_little_data(staff_client):
    study = chat_study(3)
    page = staff_client.get(f"/analysis/{study.slug}/chat/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Conversations with person were rated" in text
    assert 'id="too-little"' in text
    assert CHAT_PLAN.primary.name.split(":")[0] in text
    assert staff_client.get(f"/analysis/{study.slug}/chat/report.html").status_code == 200


def test_analysis_page_says_why_when_nothing_is_rated(staff_client):
    study = StudyFactory(kind="chat")
    ChatSettings.objects.create(study=study)
    page = staff_client.get(f"/analysis/{study.slug}/chat/")
    assert page.status_code == 200
    assert "no rated conversation" in page.content.decode()


def test_enough_data_has_no_warning_and_the_report_writes_its_files(tmp_path):
    study = chat_study(20, person_bonus=15)
    from analysis.services import AnalysisOptions, analysis_entry

    lines = analysis_entry(study=study).report_write(study, AnalysisOptions(), tmp_path)
    assert not [line for line in lines if line.startswith("Too little")]
    assert {p.name for p in tmp_path.iterdir()} >= {
        "cells.csv",
        "contrasts.csv",
        "pets_by_cell.png",
        "report.html",
    }
    assert "higher than with gpt" in lines[0]


def test_the_primary_test_is_the_interaction_in_the_plan_and_the_preregistration():
    study = chat_study(1)
    planned = study_planned_analysis(study=study)
    assert planned["primary_test"]["key"] == "interaction"
    assert CHAT_PLAN.primary.name in prereg_markdown(study)


def test_power_plan_and_launch_panel_on_typed_effects():
    from analysis.study_power import study_power_plan
    from kinds.chat.power import chat_launch_power_context, chat_launch_power_html

    study = chat_study(1)
    plan = study_power_plan(study=study)
    by = {(line.condition, line.power): line for line in plan.lines}
    assert (
        by[("source × label interaction", 0.8)].ratings_per_condition
        > by[("source effect", 0.8)].ratings_per_condition
    )
    assert (
        by[("source effect", 0.8)].participants_per_condition
        == 4 * by[("source effect", 0.8)].ratings_per_condition
    )
    bigger = chat_launch_power_context(study=study, query={"effect-source": "20", "effect-sd": "20"})
    assert bigger["typed"] and not bigger["typing_errors"]
    first = {r["test"]: r["per_cell"] for r in bigger["rows"] if r["power"] == 80}
    assert first["source effect"] < by[("source effect", 0.8)].ratings_per_condition
    wrong = chat_launch_power_context(study=study, query={"effect-sd": "-3"})
    assert wrong["typing_errors"]
    html = chat_launch_power_html(study, {})
    assert "Conversations a cell" in html and "effect-interaction" in html


def test_the_transcript_is_offered_by_the_command_the_api_and_the_page_only_for_chat_studies(
    staff_client, tmp_path
):
    from django.core.management import CommandError, call_command

    study = chat_study(1)
    out = tmp_path / "t.csv"
    call_command("export", study.slug, "--what", "transcript", "--out", str(out))
    assert len(out.read_text().splitlines()) == 1 + 4 * 4  # header + four turns of four conversations
    assert staff_client.get(f"/analysis/{study.slug}/exports/transcript.csv").status_code == 200
    assert staff_client.get(f"/api/studies/{study.slug}/exports/transcript.csv").status_code == 200
    other = StudyFactory()  # a rating study has no transcript
    with pytest.raises(CommandError, match="no export 'transcript'"):
        call_command("export", other.slug, "--what", "transcript", "--out", str(out))
    assert staff_client.get(f"/analysis/{other.slug}/exports/transcript.csv").status_code == 404
    assert staff_client.get(f"/api/studies/{other.slug}/exports/transcript.csv").status_code == 404
