"""Power for the chat kind's source × label design, held to statsmodels and to a simulation."""

import numpy as np
import pytest
from statsmodels.stats.power import TTestIndPower

from kinds.chat.power_math import design_power, f_power, interaction_component, interaction_pattern
from kinds.chat.stats import cell_fit, contrast_test, interaction_rows


def test_one_label_source_effect_is_the_two_sample_t_test():
    (line,) = design_power(
        sources=2, labels=1, source_effect=10, interaction_effect=0, sd=20, alpha=0.05, powers=(0.8,)
    )
    n = TTestIndPower().solve_power(effect_size=0.5, alpha=0.05, power=0.8)
    assert line.per_cell == int(np.ceil(n))
    assert line.cohens_f == pytest.approx(0.25)  # f = d / 2 for two groups


def test_two_by_two_needs_more_for_the_interaction_and_more_power_needs_more():
    lines = design_power(
        sources=2, labels=2, source_effect=10, interaction_effect=10, sd=20, alpha=0.05, powers=(0.8, 0.9)
    )
    by = {(line.test, line.power): line.per_cell for line in lines}
    assert by[("source × label interaction", 0.8)] > by[("source effect", 0.8)]
    assert by[("source effect", 0.9)] > by[("source effect", 0.8)]
    # 2×2: the interaction of δ has λ = n δ²/(4σ²), four times less than the source effect's n δ²/σ²
    assert by[("source × label interaction", 0.8)] == pytest.approx(4 * by[("source effect", 0.8)], rel=0.03)
    assert {line.cells for line in lines} == {4}


def test_interaction_power_by_simulation_two_by_three():
    (line,) = [
        x
        for x in design_power(
            sources=2, labels=3, source_effect=10, interaction_effect=15, sd=20, alpha=0.05, powers=(0.8,)
        )
        if x.test.startswith("source ×")
    ]
    n = line.per_cell
    rng = np.random.default_rng(7)
    mu = interaction_pattern(2, 3, 15) + np.array([[50, 50, 50], [60, 60, 60]])
    hits, runs = 0, 400
    import pandas as pd

    for _ in range(runs):
        rows = []
        for i, s in enumerate(["a", "b"]):
            for j, lab in enumerate(["none", "AI", "person"]):
                for y in rng.normal(mu[i, j], 20, n):
                    rows.append({"source": s, "label": lab, "y": y})
        fit = cell_fit(pd.DataFrame(rows), "y", sources=["a", "b"], labels=["none", "AI", "person"])
        hits += contrast_test(fit, interaction_rows(fit))[3] < 0.05
    # the planned 80 % within simulation error (HC3 is slightly conservative at small n)
    assert 0.70 <= hits / runs <= 0.90
    assert (
        f_power(
            n, component=interaction_component(interaction_pattern(2, 3, 15)), sd=20, df_num=2, alpha=0.05
        )
        >= 0.8
    )
