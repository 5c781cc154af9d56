"""The score's reasons beyond behaviour counts (studies/authenticity_reasons.py): traps without signals, impossible
signals, a driven browser's footprints, machine-made pointer paths, and what the answers show."""

import random

from studies.authenticity import NO_SIGNALS, score_compute, signals_parse
from studies.authenticity_reasons import answers_summary, cohen_kappa, spearman

CLIENT = {"au": [], "sw": 1280, "sh": 800, "mt": 0, "ua": "desktop"}
MOUSE = {"t": 12000, "fi": 400, "pm": 80, "pd": 1, "cl": 1, "sv": 14000}


def pages_of(page: dict, n: int = 10) -> dict:
    return {f"items:{i}": dict(page) for i in range(n)}


def test_trap_outcomes_count_without_signals_and_no_signals_alone_stays_unflagged():
    assert score_compute(client={}, pages={}).reasons == [NO_SIGNALS]
    failed = score_compute(client={}, pages={}, picture="failed", pairs={"6": 1, "7": 1})
    assert (failed.score, failed.flagged) == (30, True) and failed.reasons[0] == NO_SIGNALS
    followed = score_compute(client={}, pages={"items:3": {"trap": 1}})
    assert followed.flagged
    alone = score_compute(client={}, pages={}, picture="failed")
    assert (alone.score, alone.flagged) == (60, False)


def test_a_stylesheet_never_fetched_counts_only_without_signals_and_never_flags_alone():
    kappa = {"kappa": 0.9, "judged": 10}
    # JavaScript off in a browser: the stylesheet was fetched, "no signals" alone, no score.
    assert score_compute(client={}, pages={}, loaded=True).score is None
    unseen = score_compute(client={}, pages={}, loaded=False)
    assert (unseen.score, unseen.flagged) == (60, False) and unseen.reasons[0] == NO_SIGNALS
    assert unseen.reasons[1].startswith("the pages' stylesheet was never fetched")
    # With what the answers show: a program posting a model's answers.
    assert score_compute(client={}, pages={}, answers=kappa, loaded=False).flagged
    assert not score_compute(client={}, pages={}, answers=kappa, loaded=True).flagged
    # A browser that sends signals is read by them: the stylesheet is not asked about.
    assert score_compute(client=CLIENT, pages=pages_of(MOUSE), loaded=False, fast_page_ms=1500).score == 100


def test_a_page_longer_on_screen_than_the_server_allows_is_impossible_on_two_pages():
    pages = pages_of(MOUSE)
    assert score_compute(client=CLIENT, pages=pages, fast_page_ms=1500).score == 100
    pages["items:1"] = {**MOUSE, "sv": 300}  # one page: a clock that jumped, never a reason
    assert score_compute(client=CLIENT, pages=pages, fast_page_ms=1500).score == 100
    pages["items:2"] = {**MOUSE, "sv": 250}
    result = score_compute(client=CLIENT, pages=pages, fast_page_ms=1500)
    assert result.flagged and result.reasons[0].startswith("impossible signals on 2 of 10 pages: 12000 ms")


def test_counts_contradicting_their_own_page_are_impossible():
    for page in (
        {**MOUSE, "fi": 13000},
        {**MOUSE, "tp": 2, "pd": 1},
        {**MOUSE, "pm": 9000},
        {**MOUSE, "k": 2000},
    ):
        assert score_compute(client=CLIENT, pages=pages_of(page), fast_page_ms=1500).flagged, page


def test_footprints_are_weighted_reasons_and_none_flags_alone():
    _, client = signals_parse(
        '{"t": 1, "c": {"au": [], "fp": ["getter", "headless", "swgl", "nonsense", 3]}}'
    )
    assert client["fp"] == ["getter", "headless", "swgl"]
    for hint, score in (("getter", 60), ("headless", 70), ("swgl", 100)):
        result = score_compute(client={**CLIENT, "fp": [hint]}, pages=pages_of(MOUSE), fast_page_ms=1500)
        assert (result.score, result.flagged) == (score, False)
    both = score_compute(client={**CLIENT, "fp": ["getter", "headless"]}, pages=pages_of(MOUSE))
    assert both.flagged


def test_machine_made_pointer_paths_and_whole_page_text_reads_are_reasons():
    straight = {**MOUSE, "lv": 70}
    result = score_compute(client=CLIENT, pages=pages_of(straight), fast_page_ms=1500)
    assert result.reasons[0].startswith("synthetic pointer paths: 700 of 800 moves") and not result.flagged
    human = {**MOUSE, "lv": 3, "sm": 4}
    assert score_compute(client=CLIENT, pages=pages_of(human), fast_page_ms=1500).score == 100
    read = score_compute(client=CLIENT, pages=pages_of({**MOUSE, "rt": 1}), fast_page_ms=1500)
    assert read.score == 70


def test_answers_agreeing_with_the_judges_and_timing_that_ignores_length_flag_together():
    rng = random.Random(3)
    words = [rng.randint(30, 200) for _ in range(10)]
    judge = [rng.choice([1, 2, 3]) for _ in range(10)]
    person = answers_summary(
        timed=[(w, int(w / 4 * 1000 + rng.uniform(1000, 4000))) for w in words],
        judged=list(
            zip([j if rng.random() < 0.5 else rng.choice([1, 2, 3]) for j in judge], judge, strict=True)
        ),
    )
    assert score_compute(client={}, pages={}, answers=person).score is None
    agent = answers_summary(
        timed=[(w, 8000 - w * 20) for w in words], judged=list(zip(judge, judge, strict=True))
    )
    result = score_compute(client={}, pages={}, answers=agent)
    assert result.flagged and result.reasons[1].startswith("agrees with the study's LLM judges at kappa 1.00")
    same = answers_summary(timed=[(w, 3000 + i) for i, w in enumerate(words)], judged=[])
    assert (
        score_compute(client={}, pages={}, answers=same).reasons[-1].startswith("the same time on every page")
    )


def test_kappa_and_rank_correlation():
    assert cohen_kappa([1, 2, 3, 1], [1, 2, 3, 1]) == 1
    assert cohen_kappa([1, 1], [1, 1]) is None
    assert spearman([1, 2, 3], [10, 20, 30]) == 1 and spearman([1, 2, 3], [3, 2, 1]) == -1
