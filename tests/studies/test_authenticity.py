"""The authenticity signals' parsing and the score's reasons (studies/authenticity.py): pure functions."""

import json

import pytest

from studies.authenticity import (
    FLAG_BELOW,
    MAX_FIELD_CHARS,
    NO_SIGNALS,
    score_compute,
    signals_parse,
    user_agent_class,
)

CLIENT = {"au": [], "sw": 1280, "sh": 800, "mt": 0, "ua": "desktop"}


def pages_of(page: dict, n: int = 10, *, consent: dict | None = None) -> dict:
    out = {f"items:{i}": dict(page) for i in range(1, n + 1)}
    out["consent"] = consent or {"t": 20000, "fi": 300, "pm": 40, "pd": 1, "cl": 1}
    return out


MOUSE = {"t": 12000, "fi": 400, "pm": 80, "pd": 1, "cl": 1}
TOUCH = {"t": 9000, "fi": 900, "pd": 1, "tp": 1, "cl": 1}
KEYBOARD = {"t": 15000, "fi": 700, "k": 4}  # Tab, Tab, then the shortcut key (requestSubmit: no click event)
SCREEN_READER = {
    "t": 30000,
    "cl": 1,
}  # the browser's own click from an accessibility action: no pointer, no key
SCRIPTED = {"t": 80, "sc": 1}
NO_INPUT = {"t": 50}


def test_a_page_is_parsed_clamped_and_stripped_of_anything_else():
    raw = json.dumps(
        {
            "t": 10**12,
            "fi": -5,
            "pm": 3.7,
            "k": "many",
            "cl": True,
            "x": 1,
            "c": {"au": ["webdriver", "evil"], "sw": 390},
        }
    )
    page, client = signals_parse(raw)
    assert page == {"t": 6 * 60 * 60 * 1000, "pm": 3}
    assert client == {"au": ["webdriver"], "sw": 390}


@pytest.mark.parametrize(
    "raw", [None, "", "not json", "[1, 2]", '"text"', json.dumps({"t": 1, "pad": "x" * MAX_FIELD_CHARS})]
)
def test_a_malformed_or_oversized_field_is_ignored_never_an_error(raw):
    assert signals_parse(raw) == (None, None)


def test_client_hints_that_are_not_a_list_are_dropped():
    assert signals_parse(json.dumps({"t": 5, "c": {"au": "webdriver"}}))[1] == {"au": []}


@pytest.mark.parametrize(
    ("ua", "expected"),
    [
        ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 HeadlessChrome/120.0 Safari/537.36", "headless"),
        ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile/15E148", "mobile"),
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/120.0 Safari/537.36", "desktop"),
        ("python-requests/2.31", "bot"),
        ("", "unknown"),
    ],
)
def test_the_user_agent_is_kept_as_a_class_only(ua, expected):
    assert user_agent_class(ua) == expected


@pytest.mark.parametrize(
    "page", [MOUSE, TOUCH, KEYBOARD, SCREEN_READER], ids=["mouse", "touch", "keyboard", "reader"]
)
def test_people_with_a_mouse_touch_keyboard_or_screen_reader_are_not_flagged(page):
    result = score_compute(client=CLIENT, pages=pages_of(page), fast_page_ms=1500)
    assert result.score == 100 and result.reasons == [] and not result.flagged


def test_no_signals_at_all_says_so_and_is_never_a_flag():
    result = score_compute(client={}, pages={}, fast_page_ms=1500)
    assert result.score is None and result.reasons == [NO_SIGNALS] and not result.flagged


def test_clicks_a_script_dispatched_flag_the_participant_with_the_reason():
    result = score_compute(client=CLIENT, pages=pages_of(SCRIPTED), fast_page_ms=1500)
    assert result.flagged and result.score < FLAG_BELOW
    assert any(r.startswith("scripted clicks: 10 of 11 pages") for r in result.reasons)
    assert any(r.startswith("fast: median 80 ms") for r in result.reasons)


def test_a_keyboard_shortcut_turned_into_a_script_click_is_not_a_scripted_click():
    page = {
        "t": 9000,
        "k": 1,
        "sc": 1,
    }  # an old browser without requestSubmit: participant.js clicks the button
    assert not score_compute(client=CLIENT, pages=pages_of(page), fast_page_ms=1500).flagged


def test_pages_sent_with_no_input_at_all_flag_the_participant():
    result = score_compute(client=CLIENT, pages=pages_of(NO_INPUT), fast_page_ms=1500)
    assert result.flagged and any(r.startswith("no input: 10 of 11 pages") for r in result.reasons)


def test_automation_hints_flag_the_participant_on_their_own():
    result = score_compute(client={**CLIENT, "au": ["webdriver"]}, pages=pages_of(MOUSE), fast_page_ms=1500)
    assert result.flagged and result.reasons == ["automation: the browser reports webdriver (-60)"]


def test_the_hidden_instruction_followed_flags_the_participant():
    pages = pages_of(MOUSE)
    pages["items:3"] = {**MOUSE, "trap": 1}
    result = score_compute(client=CLIENT, pages=pages, fast_page_ms=1500)
    assert result.flagged and result.reasons[0].startswith("hidden instruction followed on 1 page(s)")


def test_occasional_tab_switches_cost_nothing_most_pages_away_lower_the_score_without_a_flag_alone():
    pages = pages_of(MOUSE)
    pages["items:2"] = {**MOUSE, "vh": 1, "hm": 4000}
    assert score_compute(client=CLIENT, pages=pages, fast_page_ms=1500).score == 100
    away = pages_of({**MOUSE, "vh": 1, "bl": 1, "hm": 9000})
    half = score_compute(
        client=CLIENT, pages={**pages_of(MOUSE), **dict(list(away.items())[:6])}, fast_page_ms=1500
    )
    assert half.score == 70 and not half.flagged
    result = score_compute(client=CLIENT, pages=away, fast_page_ms=1500)
    assert result.score == 50 and not result.flagged
    assert result.reasons == ["left the page on 10 of 11 pages (another tab or app) (-50)"]


def test_pasted_free_text_with_tab_switching_flags_the_participant():
    pages = pages_of({**MOUSE, "vh": 1, "bl": 1})
    pages["demographics:0"] = {"t": 60000, "pd": 3, "cl": 3, "ps": 2, "pc": 300, "tc": 10, "vh": 2}
    result = score_compute(client=CLIENT, pages=pages, fast_page_ms=1500)
    assert result.flagged
    assert any(r.startswith("pasted text: 300 of 310 characters") for r in result.reasons)


def test_fast_pages_alone_do_not_flag_and_the_consent_page_does_not_count():
    result = score_compute(client=CLIENT, pages=pages_of({**MOUSE, "t": 900}), fast_page_ms=1500)
    assert result.score == 70 and not result.flagged
    quick_consent = pages_of(MOUSE, consent={"t": 200, "pd": 1, "cl": 1})
    assert score_compute(client=CLIENT, pages=quick_consent, fast_page_ms=1500).score == 100


def test_consistency_pairs_far_apart_on_half_of_them_lower_the_score_without_a_flag_alone():
    assert (
        score_compute(client=CLIENT, pages=pages_of(MOUSE), pairs={"10": 0, "11": 1}, fast_page_ms=1500).score
        == 70
    )
    assert score_compute(client=CLIENT, pages=pages_of(MOUSE), pairs={"9": 0, "10": 0, "11": 1}).score == 100
    result = score_compute(
        client=CLIENT, pages=pages_of({**MOUSE, "t": 900}), pairs={"11": 1}, fast_page_ms=1500
    )
    assert result.flagged and result.score == 40  # with answers faster than reading
