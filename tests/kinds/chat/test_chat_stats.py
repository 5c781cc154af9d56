"""The chat kind's source × label statistics held to statsmodels' OLS with HC3 on small known frames."""

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf

from kinds.chat.pets_analysis import PETS_FACTORS, cronbach_alpha, item_column, pets_scores
from kinds.chat.stats import ChatStatsError, cell_fit, chat_stats, contrast_test, interaction_rows

SOURCES = ["gpt", "person"]


def frame_of(labels, n=12, seed=0, effect=8.0, interaction=0.0):
    rng = np.random.default_rng(seed)
    rows = []
    pid = 0
    for s, source in enumerate(SOURCES):
        for j, label in enumerate(labels):
            for _ in range(n + s + j):  # unequal cells
                base = 50 + effect * s + interaction * s * (j == 1)
                record = {
                    "participant": pid,
                    "source": source,
                    "label": label,
                    "scale": rng.choice(["Good", "Okay", "Bad"]),
                }
                for item in range(1, 11):
                    record[item_column(item)] = float(np.clip(base + rng.normal(0, 15 + 5 * s), 0, 100))
                rows.append(record)
                pid += 1
    return pd.DataFrame(rows)


def test_pets_scores_are_item_means():
    frame = frame_of(["AI", "person"], n=3)
    scored = pets_scores(frame)
    row = frame.iloc[0]
    assert scored["pets"].iloc[0] == pytest.approx(np.mean([row[item_column(i)] for i in range(1, 11)]))
    assert scored["pets_er"].iloc[0] == pytest.approx(
        np.mean([row[item_column(i)] for i in PETS_FACTORS["pets_er"][1]])
    )
    assert scored["pets_ut"].iloc[0] == pytest.approx(np.mean([row[item_column(i)] for i in range(7, 11)]))
    bad = frame.copy()
    bad.loc[0, item_column(3)] = 101
    with pytest.raises(ValueError):
        pets_scores(bad)


def test_cronbach_alpha_matches_formula_on_a_known_table():
    # three items, four people: α = k/(k−1)·(1 − Σ var_i / var_total)
    table = pd.DataFrame(
        {item_column(1): [1, 2, 3, 4], item_column(2): [2, 2, 4, 4], item_column(3): [1, 3, 3, 5.0]}
    )
    var_items = table.var(ddof=1).sum()
    var_total = table.sum(axis=1).var(ddof=1)
    assert cronbach_alpha(table, (1, 2, 3)) == pytest.approx(1.5 * (1 - var_items / var_total))


@pytest.mark.parametrize("labels", [["none", "AI"], ["none", "AI", "person"]])
def test_cell_model_matches_statsmodels_ols_hc3(labels):
    frame = pets_scores(frame_of(labels, seed=len(labels), interaction=10))
    fit = cell_fit(frame, "pets", sources=SOURCES, labels=labels)
    ref = smf.ols("pets ~ C(source, Treatment('gpt')) * C(label, Treatment('none'))", data=frame).fit(
        cov_type="HC3"
    )
    # the source effect under the reference label is the treatment-coded source coefficient
    name = "C(source, Treatment('gpt'))[T.person]"
    from kinds.chat.stats import source_effect_row

    est, se, _, _ = contrast_test(fit, source_effect_row(fit, "person", label="none"))
    assert est[0] == pytest.approx(ref.params[name])
    assert se[0] == pytest.approx(ref.bse[name])
    # the interaction: the joint Wald F of the interaction coefficients
    inter_names = [n for n in ref.params.index if ":" in n]
    r = np.zeros((len(inter_names), len(ref.params)))
    for k, n in enumerate(inter_names):
        r[k, list(ref.params.index).index(n)] = 1
    wald = ref.wald_test(r, use_f=True, scalar=True)
    _, _, f, p = contrast_test(fit, interaction_rows(fit))
    assert f == pytest.approx(float(wald.statistic))
    assert p == pytest.approx(float(wald.pvalue))
    assert fit.df == int(ref.df_resid)


def test_chat_stats_detects_a_planted_interaction_and_writes_the_headline():
    frame = frame_of(["none", "AI"], n=60, seed=3, effect=0.0, interaction=25.0)
    result = chat_stats(frame, sources=SOURCES, labels=["none", "AI"], scale=["Good", "Okay", "Bad"])
    inter = result.contrasts.query("outcome == 'pets' and test == 'interaction'").iloc[0]
    assert inter["p"] < 0.001
    assert inter["estimate"] == pytest.approx(25, abs=6)
    assert "differed by the label shown" in result.headline
    assert result.headline.startswith("Conversations with person were rated")
    assert not result.too_little
    null = chat_stats(frame_of(["none", "AI"], n=60, seed=4), sources=SOURCES, labels=["none", "AI"])
    assert (
        "did not differ detectably" in null.headline
        or null.contrasts.query("outcome == 'pets' and test == 'interaction'").iloc[0]["p"] < 0.05
    )  # a 5 % false positive is allowed; the sentence must say which


def test_too_little_data_is_refused_below_two_and_warned_below_enough():
    frame = frame_of(["none", "AI"], n=3)
    result = chat_stats(frame, sources=SOURCES, labels=["none", "AI"])
    assert len(result.too_little) == 4
    tiny = frame[~((frame["source"] == "gpt") & (frame["label"] == "AI"))].copy()
    tiny = pd.concat([tiny, frame[(frame["source"] == "gpt") & (frame["label"] == "AI")].head(1)])
    with pytest.raises(ChatStatsError, match="at least 2"):
        chat_stats(tiny, sources=SOURCES, labels=["none", "AI"])


def test_one_conversation_per_participant():
    frame = frame_of(["none", "AI"], n=3)
    frame.loc[1, "participant"] = frame.loc[0, "participant"]
    with pytest.raises(ChatStatsError, match="one conversation per participant"):
        chat_stats(frame, sources=SOURCES, labels=["none", "AI"])
