"""TEQ scoring as published (Spreng et al., 2009): 0-4 per answer, items 2, 4, 7, 10, 11, 12, 14, 15 reversed."""

import pytest

from kinds.rating import teq


def test_the_sixteen_items_and_the_published_reverse_scored_ones():
    assert sorted(teq.ITEMS) == list(range(1, 17))
    assert teq.REVERSE_SCORED == {2, 4, 7, 10, 11, 12, 14, 15}
    assert [label for _code, label in teq.OPTIONS] == ["Never", "Rarely", "Sometimes", "Often", "Always"]


def test_the_most_empathic_answers_score_64_and_the_least_0():
    most = {n: ("never" if n in teq.REVERSE_SCORED else "always") for n in teq.ITEMS}
    least = {n: ("always" if n in teq.REVERSE_SCORED else "never") for n in teq.ITEMS}
    assert teq.teq_score(most) == 64 == teq.MAX_SCORE
    assert teq.teq_score(least) == 0


def test_a_mixed_set_of_answers():
    answers = dict.fromkeys(teq.ITEMS, "sometimes")  # 2 points either way: 32
    answers[1] = "often"  # +1
    answers[2] = "rarely"  # reversed: 3 instead of 2, +1
    assert teq.teq_score(answers) == 34


def test_an_incomplete_set_is_refused():
    with pytest.raises(ValueError, match=r"\[16\]"):
        teq.teq_score({n: "often" for n in range(1, 16)})
