"""Small samples are reported as such: per-emotion tests on a handful of ratings, the heat map's n per cell, an
ordinal model whose standard errors cannot be computed. And the tables read as words, in keyboard-reachable
scroll areas."""

import warnings

import pandas as pd
import pytest

from analysis import ordinal, stats
from analysis.html_tables import SMALL_SAMPLE_MARK
from analysis.services import AnalysisOptions, study_analyze
from kinds.rating import figures
from kinds.rating import report as reports
from tests.analysis.builders import Rated, build_rating_study, participants_from_counts

SCALE = stats.Scale(values=(1, 2, 3), labels=("Bad", "Okay", "Good"))


def _rows(triples):
    return pd.DataFrame(
        [
            {
                "value": v,
                "condition": c,
                "emotion": e,
                "valence": "negative" if e in ("sad", "afraid") else "positive",
                "participant_id": i,
                "response_time_ms": 3000.0,
            }
            for i, (c, e, v) in enumerate(triples)
        ]
    )


def test_a_chi_square_on_a_few_ratings_is_marked_and_gets_fishers_exact_p():
    few = stats.chi_square([[2, 1], [0, 3]], yates=True)
    assert few.min_expected < stats.SMALL_SAMPLE_MIN_EXPECTED
    assert "small sample" in few.note and 0 < few.p_exact <= 1
    plenty = stats.chi_square([[40, 60], [25, 75]], yates=True)
    assert plenty.min_expected >= 5 and plenty.note == "" and plenty.p_exact != plenty.p_exact  # NaN


def test_per_emotion_tests_on_one_to_four_ratings_are_flagged_small():
    rows = _rows(
        [("human", "sad", v) for v in (1, 2, 3, 2)]
        + [("gpt4", "sad", v) for v in (3, 3, 2)]
        + [("human", "joyful", v) for v in (1, 2, 3, 2, 1, 2, 3, 2) * 10]
        + [("gpt4", "joyful", v) for v in (3, 3, 2, 1, 3, 3, 2, 3) * 10]
    )
    table = stats.tests_table(rows, SCALE, ["human", "gpt4"], "human")
    sad = table[(table["scope"] == "emotion") & (table["group"] == "sad")]
    assert sad["small_sample"].all()
    assert sad.loc[sad["test"] == stats.TEST_2X2, "p_exact"].notna().all()
    joyful_2x2 = table[(table["group"] == "joyful") & (table["test"] == stats.TEST_2X2)]
    assert not joyful_2x2["small_sample"].any()


@pytest.mark.django_db
def test_the_main_table_reads_as_words_and_marks_too_few():
    people = participants_from_counts("human", {1: 15, 2: 25, 3: 10}) + participants_from_counts(
        "gpt4", {1: 10, 2: 20, 3: 20}
    )
    people += [
        Rated("human", [("joyful", 3, 4000), ("joyful", 1, 4000)]),
        Rated("gpt4", [("joyful", 3, 4000)]),
    ]
    study = build_rating_study(slug="few", conditions=["human", "gpt4"], participants=people).study
    analysis = study_analyze(study=study, options=AnalysisOptions(bootstrap_samples=50))
    context = reports.report_context(analysis, inline_figures=False)
    html = str(context["main_html"])
    for label in ("Cramér's V", "p (Holm)", "Relative change", "Sample size", "Fisher's exact p"):
        assert f"<th>{label}</th>" in html.replace("&#x27;", "'"), label
    for raw in ("cramers_v", "p_holm", "top_share_baseline"):
        assert f"<th>{raw}</th>" not in html
    assert SMALL_SAMPLE_MARK in html and context["small_sample_tests"] >= 1
    # The CSV keeps the short names scripts rely on.
    assert {"cramers_v", "small_sample", "p_exact"} <= set(reports.main_table(analysis).columns)


@pytest.mark.django_db
def test_wide_tables_scroll_in_regions_a_keyboard_reaches(rated_study):
    analysis = study_analyze(study=rated_study, options=AnalysisOptions(bootstrap_samples=50))
    context = reports.report_context(analysis, inline_figures=False)
    for key in ("exclusions_html", "distribution_html", "main_html", "ordinal_html"):
        html = str(context[key])
        assert html.startswith('<div class="table-scroll" tabindex="0" role="region" aria-label="'), key


@pytest.mark.django_db
def test_the_heat_map_shows_n_per_cell(rated_study):
    analysis = study_analyze(study=rated_study, options=AnalysisOptions(bootstrap_samples=50))
    svg = figures.figure_render(analysis, "top_share_by_emotion", "svg").decode()
    # matplotlib writes text as glyph paths in SVG; the cell labels are in its comments/ids only when text is
    # kept, so check the numbers that were drawn through the figure's own text objects instead.
    fig = figures.top_share_by_emotion(analysis)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts and all(" n=" in t for t in texts)
    assert sorted(int(t.split("n=")[1]) for t in texts) == [50, 50, 50, 50]
    assert svg.startswith("<?xml") or "<svg" in svg


# Three conditions, five ratings, emotions nested in conditions: the model with emotion has a singular Hessian.
NESTED = [("llama", "anxious", 2), ("human", "afraid", 1), ("llama", "proud", 1), ("human", "afraid", 3),
          ("human", "lonely", 1)]  # fmt: skip


def test_an_ordinal_fit_without_standard_errors_is_not_reported_as_converged(recwarn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing may reach stderr as a warning
        fit = ordinal._ordinal_fit(_rows(NESTED), ["human", "gpt4", "llama"], "human", True)
    assert not fit.converged
    assert "standard errors not available" in fit.note


def test_the_ordinal_model_falls_back_and_says_why():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = ordinal.ordinal_model(_rows(NESTED), ["human", "gpt4", "llama"], "human")
    assert fit.formula == "rating ~ condition"
    assert "rating ~ condition + emotion: standard errors not available" in fit.note
    if fit.converged:
        assert fit.coefficients["se"].map(lambda v: v == v).all()  # converged means standard errors exist
