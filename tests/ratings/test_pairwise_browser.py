"""The seeded `pairs-demo` walked in headless Chromium as scripts/walk.py walks it (phone 390×844 and desktop
1280×800, JavaScript on and off, axe-core on every page), and the walks' answers found in the study's export."""

from __future__ import annotations

import csv
import io

import pytest
from playwright.sync_api import expect

from analysis import exports
from kinds.pairwise.demo import pairwise_demo_ensure
from kinds.pairwise.models import PairItem
from scripts.walk import VIEWPORTS, walk
from studies.demo.seed import _participant_link
from studies.models import Participant, ParticipantAuthenticity

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def study():
    """pairs-demo as `make run` seeds it (the kind's demo, which seed_demo calls). Only this study: seeding every
    demo study (900 published ratings among them) cost each test here seconds before its browser opened."""
    return pairwise_demo_ensure()


def test_pairs_demo_is_walked_on_phone_and_desktop_with_and_without_javascript_into_the_export(
    study, browser, live_server
):
    # The hidden instruction on every pair page (the demo's default): axe stays clean and no person falls into it.
    assert study.trap_hidden_instruction
    walks = [
        walk(browser, live_server.url, study.slug, viewport, javascript, None)
        for viewport in VIEWPORTS
        for javascript in (True, False)
    ]
    for done in walks:
        label = (done["viewport"], done["javascript"])
        assert done["error"] is None, (label, done["error"])
        assert done["axe_violations"] == [], (label, done["axe_violations"])
        assert done["failed_requests"] == [], label
        assert done["completion_code"] == "PAIRS-COMPLETE", label
        if done["javascript"]:  # consent and instructions in one request, then one request per page
            # 11 pairs and the two consistency pairs' second showings (the demo's traps)
            assert done["posts"] == 1 + 13 and done["page loads"] == 1, done

    walkers = Participant.objects.filter(study=study, external_id__startswith="walk-")
    assert walkers.count() == 4 and all(p.status == "completed" for p in walkers)
    assert not any(p.flagged_for_exclusion for p in walkers)  # the known-answer pair was read and passed
    signals = ParticipantAuthenticity.objects.filter(participant__in=walkers)
    # Every walk has a row: with JavaScript its signals, without it what its pages and answers show; none for the
    # trap.
    assert signals.count() == 4
    assert not any(page.get("trap") for row in signals for page in row.pages.values())
    assert not any("hidden instruction" in reason for row in signals for reason in row.reasons)
    text = "".join(exports.export_lines(study=study, what="ratings", reveal_participant_ids=True))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 4 * 10
    assert {row["participant"] for row in rows} == {p.external_id for p in walkers}
    stored = PairItem.objects.filter(participant__in=walkers, known_answer__isnull=True, trap="")
    assert sorted((r["participant"], int(r["position"]), r["choice"]) for r in rows) == sorted(
        stored.values_list("participant__external_id", "position", "choice")
    )
    assert {r["left_condition"] for r in rows} | {r["right_condition"] for r in rows} == {
        "human",
        "chatgpt",
        "chatgpt_empathy",
    }


def test_keys_1_2_3_answer_a_pair_in_place_with_the_inadequate_flag(study, live_server, page_at):
    page = page_at("desktop")
    page.goto(_participant_link(live_server.url, study))
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="I have read the instructions, continue").click()
    expect(page.locator("h1")).to_have_text("Pair 1 of 13")
    page.get_by_label("Both replies are inadequate").check()
    page.keyboard.press("2")
    expect(page.locator("h1")).to_have_text("Pair 2 of 13")
    page.keyboard.press("3")
    expect(page.locator("h1")).to_have_text("Pair 3 of 13")
    participant = Participant.objects.get(study=study, external_id__startswith="demo-")
    answered = list(participant.pair_items.filter(answered_at__isnull=False).order_by("position"))
    assert [(p.choice, p.both_inadequate) for p in answered] == [("right", True), ("tie", False)]
