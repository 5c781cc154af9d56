"""A pairwise study's answers export (the kind's `answers_export`, served as the study's `ratings` export) and
the analysis frame built from the same rows (kinds/pairwise/frame.py)."""

import csv
import io

import pytest

from analysis import exports
from analysis.pseudonyms import pseudonym
from kinds.pairwise.frame import FRAME_COLUMNS, pairwise_frame
from kinds.pairwise.models import PairItem
from studies.models import Participant
from studies.participants import participant_enroll
from tests.factories import pairwise_study_build
from tests.ratings.helpers import consent_and_instructions, enter
from tests.ratings.test_pairwise_flow import answer, good_side, page_of, position_of

pytestmark = pytest.mark.django_db


def walk_through(client, study, pid, *, fail_check=False):
    """A participant answering every pair (the fuller reply; the poorer one on a known-answer pair if asked)."""
    enter(client, study, pid)
    consent_and_instructions(client, study)
    while "Reply A" in (page := page_of(client, study)):
        choice = good_side(page)
        if (
            fail_check
            and PairItem.objects.get(participant__external_id=pid, position=position_of(page)).is_check
        ):
            choice = "left" if choice == "right" else "right"
        answer(client, study, position_of(page), choice, both_inadequate="1" if choice == "left" else "")


def rows_of(study, **kwargs):
    text = "".join(exports.export_lines(study=study, what="ratings", **kwargs))
    return list(csv.DictReader(io.StringIO(text)))


def test_the_export_has_one_row_per_answered_regular_pair_with_the_contract_columns(client):
    study = pairwise_study_build(conditions=3, prompts=6, items_per_participant=3, known_answers=(1,))
    walk_through(client, study, "PID1")
    rows = rows_of(study, reveal_participant_ids=True)
    assert len(rows) == 3  # the known-answer pair is an attention check, not a vote
    assert set(FRAME_COLUMNS) <= set(rows[0])
    stored = {
        p.position: p
        for p in PairItem.objects.filter(known_answer__isnull=True).select_related(
            "prompt", "left__condition", "right__condition"
        )
    }
    for row in rows:
        page = stored[int(row["position"])]
        assert row["participant"] == "PID1"
        assert row["prompt_id"] == page.prompt.dialogue_id
        assert (row["left_condition"], row["right_condition"]) == (
            page.left.condition.name,
            page.right.condition.name,
        )
        assert row["choice"] == page.choice and row["choice"] in {"left", "right", "tie"}
        assert row["both_inadequate"] == ("true" if page.both_inadequate else "false")
        assert int(row["response_time_ms"]) == page.response_time_ms
        assert (int(row["left_length"]), int(row["right_length"])) == (
            len(page.left.text),
            len(page.right.text),
        )
        assert row["excluded"] == "false"


def test_the_export_pseudonymises_participants_for_whoever_may_not_see_their_ids(client):
    study = pairwise_study_build(conditions=2, prompts=4, items_per_participant=2)
    walk_through(client, study, "PID1")
    rows = rows_of(study, reveal_participant_ids=False)
    assert {row["participant"] for row in rows} == {pseudonym(study_id=study.pk, platform_id="PID1")}


def test_the_frame_keeps_counted_participants_only_with_exactly_the_contract_columns(client):
    study = pairwise_study_build(
        conditions=3, prompts=6, items_per_participant=3, known_answers=(0,), quota_per_condition=50
    )
    walk_through(client, study, "PID1")
    client.cookies.clear()
    walk_through(client, study, "PID2", fail_check=True)  # flagged: excluded by the declared rules
    participant_enroll(study=study, external_id="PID3")  # enrolled, nothing answered
    assert Participant.objects.get(external_id="PID2").flagged_for_exclusion

    frame = pairwise_frame(study=study)

    assert list(frame.columns) == FRAME_COLUMNS
    assert len(frame) == 3
    assert set(frame["participant"]) == {pseudonym(study_id=study.pk, platform_id="PID1")}
    assert frame["both_inadequate"].dtype == bool and frame["position"].dtype.kind == "i"
    assert set(frame["choice"]) <= {"left", "right", "tie"}
    assert len(rows_of(study)) == 6 and sum(r["excluded"] == "true" for r in rows_of(study)) == 3


def test_the_api_and_the_analysts_page_serve_the_same_pairwise_export_to_an_analyst(client, analyst):
    study = pairwise_study_build(conditions=2, prompts=4, items_per_participant=2)
    walk_through(client, study, "PID1")
    client.logout()
    client.force_login(analyst)
    expected = "".join(exports.export_lines(study=study, what="ratings", reveal_participant_ids=False))
    for url in (
        f"/api/studies/{study.slug}/exports/ratings.csv",
        f"/analysis/{study.slug}/exports/ratings.csv",
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        assert b"".join(response.streaming_content).decode() == expected
    assert "PID1" not in expected and expected.startswith("participant,prompt_id,left_condition")
