import os
import random
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from openpyxl import Workbook
from scipy import stats

from kinds.questionnaire.analysis import emotionbench_analyse
from studies.models import Condition, QuestionnaireAnswer, QuestionnaireRun, Situation, Study

from .conftest import PANAS_ITEMS, write_results_folder

pytestmark = pytest.mark.django_db

# The published data lives in shared/ beside the checkout (as in CI); EMOTIONBENCH_DATA points elsewhere.
REAL_DATA = Path(
    os.environ.get(
        "EMOTIONBENCH_DATA", Path(__file__).resolve().parents[3] / "shared" / "data" / "emotionbench"
    )
)


def _crowd(folder: Path, subjects: list[tuple[str, list[int], list[int]]]) -> None:
    workbook = Workbook()
    sheet = workbook.active
    sheet.title = "Raw"
    sheet.append([None, "Info", *[s[0] for s in subjects]])
    for label in ["Gender:", "Year of Birth:", "Country", "Employment", "Education"]:
        sheet.append([0, label, *["x"] * len(subjects)])
    for block, prefix in ((1, "current feeling"), (2, "feeling")):
        for i, item in enumerate(PANAS_ITEMS):
            sheet.append(
                [
                    0,
                    f"Please indicate the extent of your {prefix}: - {item}",
                    *[s[block][i] for s in subjects],
                ]
            )
    workbook.create_sheet("Summary")["A1"] = "not to be used"
    workbook.save(folder / "crowd.xlsx")


def _published_folder(tmp_path, rng):
    # Published Anger-0_scenario-0 shows the pool's 2nd situation of factor 1 (matched by text); Anger-0_scenario-1
    # shows an edited text (kept as a new situation of factor 1).
    evoked = {
        ("Anger", 0, 0): ("Anger Driving Situations situation 2.", 4),
        ("Anger", 0, 1): ("An edited driving situation.", 4),
        ("Fear", 0, 0): ("Fear Social Fears situation 1.", 4),
    }
    folder = write_results_folder(
        tmp_path,
        models={
            "model-a": {"default": 6, "evoked": evoked, "default_values": "random"},
            "model-b.1": {
                "default": 6,
                "evoked": {**evoked, ("Fear", 0, 0): ("Fear Social Fears situation 1.", 2)},
            },
        },
        rng=rng,
    )
    return folder


def _subject(header, rng):
    return (header, [rng.randint(1, 3) for _ in range(20)], [rng.randint(2, 5) for _ in range(20)])


def test_it_imports_published_answers_and_reports_what_it_skipped(imported_basics, tmp_path, rng, capsys):
    folder = _published_folder(tmp_path, rng)
    # model-a leaves one column blank (as llama3.1-8b does).
    import pandas as pd

    frame = pd.read_csv(folder / "model-a-PANAS-testing.csv", dtype=str, keep_default_na=False)
    frame.loc[1:, "Fear-0_scenario-0_test-3_order-0"] = ""
    frame.to_csv(folder / "model-a-PANAS-testing.csv", index=False)
    _crowd(folder, [_subject("Angry_F1S1", rng), _subject("Angry_F1S2", rng), _subject("Fear_F1S1", rng)])

    call_command("import_emotionbench_results", "eb", str(tmp_path))
    out = capsys.readouterr().out
    study = Study.objects.get(slug="eb")
    assert study.kind == Study.Kind.QUESTIONNAIRE and study.questionnaire_settings.instrument.name == "PANAS"
    assert set(study.conditions.values_list("name", "kind")) == {
        ("model-a", "llm"),
        ("model-b_1", "llm"),
        ("human", "human"),
    }
    assert "model-a-PANAS-testing.csv: 1 blank answer columns not imported" in out
    assert "Fear-0_scenario-0 (tests 3)" in out
    assert "model-b.1-PANAS-testing.csv: 2 columns that other answer files have are missing" in out
    assert "Fear-0_scenario-0 (tests 2-3)" in out
    model_a = study.conditions.get(name="model-a")
    assert model_a.questionnaire_runs.filter(phase="default").count() == 6
    assert model_a.questionnaire_runs.filter(phase="evoked").count() == 11
    # Matching: same text in the same factor → the pool's situation; an edited text → a new situation.
    matched = Situation.objects.get(emotion="Anger", factor_index=1, index=2)
    assert model_a.questionnaire_runs.filter(situation=matched).count() == 4
    added = Situation.objects.get(text="An edited driving situation.")
    assert (added.emotion, added.factor_index, added.index, added.factor_name) == (
        "Anger",
        1,
        4,
        "Driving Situations",
    )
    assert "1 added with the text shown" in out
    human = study.conditions.get(name="human")
    assert human.is_baseline
    assert human.questionnaire_runs.filter(phase="evoked", situation=added).count() == 1
    run = human.questionnaire_runs.get(phase="default", subject_key="crowd-C")
    assert [a.value for a in run.answers.order_by("item_number")][:3] == [
        1,
        2,
        3,
    ] or run.answers.count() == 20

    # Re-import: the same rows, not twice as many.
    counts = (
        QuestionnaireRun.objects.count(),
        QuestionnaireAnswer.objects.count(),
        Situation.objects.count(),
    )
    call_command("import_emotionbench_results", "eb", str(tmp_path))
    assert (
        QuestionnaireRun.objects.count(),
        QuestionnaireAnswer.objects.count(),
        Situation.objects.count(),
    ) == counts


def test_an_out_of_range_answer_names_file_row_and_column_and_nothing_is_imported(
    imported_basics, tmp_path, rng
):
    import pandas as pd

    folder = _published_folder(tmp_path, rng)
    frame = pd.read_csv(folder / "model-b.1-PANAS-testing.csv", dtype=str, keep_default_na=False)
    frame.loc[5, "General_test-2_order-0"] = "7"
    frame.to_csv(folder / "model-b.1-PANAS-testing.csv", index=False)
    with pytest.raises(CommandError) as excinfo:
        call_command("import_emotionbench_results", "eb", str(tmp_path))
    assert "model-b.1-PANAS-testing.csv: row 7, column 'General_test-2_order-0': 7 is outside 1..5" in str(
        excinfo.value
    )
    assert not Study.objects.filter(slug="eb").exists()
    assert not QuestionnaireRun.objects.exists()


def test_a_bad_crowd_cell_is_reported_by_its_address(imported_basics, tmp_path, rng):
    folder = _published_folder(tmp_path, rng)
    bad = _subject("Angry_F1S1", rng)
    bad[2][4] = "lots"
    _crowd(folder, [_subject("Angry_F1S1", rng), bad])
    with pytest.raises(CommandError) as excinfo:
        call_command("import_emotionbench_results", "eb", str(tmp_path))
    # Column D = the second subject; row 7 + 20 + 4 = 31.
    assert "crowd.xlsx Raw!D31: 'lots' is not a whole number" in str(excinfo.value)
    assert not QuestionnaireRun.objects.exists()


def test_it_needs_the_instrument_imported_first(db, tmp_path, rng):
    _published_folder(tmp_path, rng)
    with pytest.raises(
        CommandError, match="instrument 'PANAS' is not imported; run `manage.py import_instruments"
    ):
        call_command("import_emotionbench_results", "eb", str(tmp_path))


def test_the_analysis_matches_scipy_and_the_published_test_procedure(imported_basics, tmp_path, rng):
    _published_folder(tmp_path, rng)
    _crowd(tmp_path / "results" / "PANAS Test", [_subject("Angry_F1S1", rng) for _ in range(6)])
    call_command("import_emotionbench_results", "eb", str(tmp_path))
    study = Study.objects.get(slug="eb")
    analysis = emotionbench_analyse(study=study, alpha=0.05)

    def category_scores(condition, phase, items, **filters):
        runs = QuestionnaireRun.objects.filter(condition__name=condition, phase=phase, **filters).order_by(
            "subject_key"
        )
        return np.array(
            [sum(run.answers.filter(item_number__in=items).values_list("value", flat=True)) for run in runs]
        )

    na = [2, 4, 6, 7, 8, 11, 13, 15, 18, 20]
    default = category_scores("model-a", "default", na)
    evoked = category_scores("model-a", "evoked", na, situation__emotion="Anger")
    result = analysis.get(condition="model-a", level="emotion", group="Anger", category="Negative Affect")
    test = result.two_sample
    v1, v2 = np.var(default, ddof=1), np.var(evoked, ddof=1)
    big, small = (v1, v2) if v1 >= v2 else (v2, v1)
    dfn, dfd = (len(default) - 1, len(evoked) - 1) if v1 >= v2 else (len(evoked) - 1, len(default) - 1)
    f_p = min(1.0, 2 * stats.f.sf(big / small, dfn, dfd))
    expected = stats.ttest_ind(evoked, default, equal_var=f_p > 0.05)
    assert test.f_p == pytest.approx(f_p)
    assert test.test == ("student" if f_p > 0.05 else "welch")
    assert test.p_value == pytest.approx(expected.pvalue)
    assert test.mean_default == pytest.approx(default.mean()) and test.sd_evoked == pytest.approx(
        evoked.std(ddof=1)
    )
    assert test.mark == ("−" if expected.pvalue >= 0.05 else ("↑" if evoked.mean() > default.mean() else "↓"))

    # Humans answered both: the paired test, aligned by subject.
    h_default = category_scores("human", "default", na)
    h_evoked = category_scores("human", "evoked", na)
    human = analysis.get(condition="human", level="emotion", group="Anger", category="Negative Affect")
    assert human.paired.p_value == pytest.approx(stats.ttest_rel(h_evoked, h_default).pvalue)
    assert human.paired.n_default == 6
    assert human.headline is human.paired

    # Situation by situation: the model's per-situation changes against the humans' (one shared situation here).
    from kinds.questionnaire.report import emotionbench_situation_agreement

    agreement = emotionbench_situation_agreement(analysis=analysis)
    row = agreement[(agreement["condition"] == "model-a") & (agreement["category"] == "NA")].iloc[0]
    shared = Situation.objects.get(
        emotion="Anger", factor_index=1, index=2
    )  # Angry_F1S1 = Anger-0_scenario-0
    model_change = category_scores("model-a", "evoked", na, situation=shared).mean() - default.mean()
    human_change = h_evoked.mean() - h_default.mean()
    assert row["situations"] == 1 and row["same_direction"] == float(
        np.sign(model_change) == np.sign(human_change)
    )


@pytest.fixture
def rng():
    return random.Random(7)


@pytest.mark.slow
def test_the_published_data_reproduces_the_papers_human_and_gpt4_figures(db, capsys):
    if not (REAL_DATA / "questionnaires.json").exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"The published EmotionBench data is missing at {REAL_DATA}.")
        pytest.skip(f"no published EmotionBench data at {REAL_DATA} (set EMOTIONBENCH_DATA)")
    call_command("import_instruments", str(REAL_DATA / "questionnaires.json"))
    call_command("import_situations", str(REAL_DATA / "situations.json"))
    call_command("import_emotionbench_results", "emotionbench", str(REAL_DATA))
    out = capsys.readouterr().out
    assert "15059 runs imported" in out
    assert "llama3.1-8b-PANAS-testing.csv: 60 blank answer columns not imported" in out
    assert "llama2-7b-PANAS-testing.csv: 13 columns that other answer files have are missing" in out
    study = Study.objects.get(slug="emotionbench")
    assert study.conditions.get(name="human").questionnaire_runs.filter(phase="evoked").count() == 1266
    analysis = emotionbench_analyse(study=study)
    human_pa = analysis.get(condition="human", level="overall", group="Overall", category="Positive Affect")
    # crowd.xlsx Summary (its reliable figures): PA 28.02 → 22.89, NA 13.62 → 24.05, paired, both significant.
    assert human_pa.two_sample.mean_default == pytest.approx(28.018957, abs=1e-4)
    assert human_pa.two_sample.mean_evoked == pytest.approx(22.890205, abs=1e-4)
    assert human_pa.paired.t_value == pytest.approx(-20.674998, abs=1e-4) and human_pa.headline.mark == "↓"
    human_na = analysis.get(condition="human", level="overall", group="Overall", category="Negative Affect")
    assert human_na.two_sample.change == pytest.approx(10.435229, abs=1e-4)
    assert human_na.headline.mark == "↑"
    gpt4 = analysis.get(
        condition="gpt-4", level="overall", group="Overall", category="Positive Affect"
    ).two_sample
    assert (round(gpt4.mean_default, 1), round(gpt4.sd_default, 1)) == (49.8, 0.8)
    assert Condition.objects.filter(study=study, kind="llm").count() == 7
    call_command("emotionbench_report", "emotionbench")
    table = capsys.readouterr().out
    assert "Human (crowd)" in table and "mixtral-8x22b" in table and "Embarrassment" in table


@pytest.mark.parametrize("spread", [1.0, 4.0])
def test_change_tests_agree_with_scipy_for_student_welch_and_paired(spread):
    from kinds.questionnaire.analysis import change_test, paired_change_test

    generator = np.random.default_rng(11)
    default = generator.normal(20, 3, 40).round()
    evoked = generator.normal(23, 3 * spread, 25).round()
    test = change_test(default=default, evoked=evoked, alpha=0.01)
    f = max(default.var(ddof=1), evoked.var(ddof=1)) / min(default.var(ddof=1), evoked.var(ddof=1))
    assert test.test == ("student" if spread == 1.0 else "welch")
    expected = stats.ttest_ind(evoked, default, equal_var=test.test == "student")
    assert test.f_value == pytest.approx(f)
    assert test.t_value == pytest.approx(expected.statistic) and test.p_value == pytest.approx(
        expected.pvalue
    )
    after = default[:25] + generator.normal(2, spread, 25).round()
    paired = paired_change_test(default=default[:25], evoked=after, alpha=0.01)
    expected = stats.ttest_rel(after, default[:25])
    assert paired.t_value == pytest.approx(expected.statistic) and paired.p_value == pytest.approx(
        expected.pvalue
    )


def test_challenging_bench_files_become_one_study_per_instrument(imported_basics, tmp_path, rng, capsys):
    import pandas as pd

    folder = tmp_path / "results" / "Challenging Bench"
    folder.mkdir(parents=True)
    items = ["I worry.", "I am calm.", "I feel low.", "I enjoy things."]
    columns = {
        "question-0": ["Prompt: rate"] + [f"{i + 1}. {t}" for i, t in enumerate(items)],
        "order-0": ["rate"] + ["1", "2", "3", "4"],
    }
    for t in range(3):
        columns[f"General_test-{t}_order-0"] = [" "] + [str(rng.randint(0, 3)) for _ in items]
        columns[f"Fear-0_scenario-0_test-{t}_order-0"] = [
            'Imagine you are the protagonist in the scenario: "Fear Social Fears situation 3."'
        ] + [str(rng.randint(0, 3)) for _ in items]
    pd.DataFrame(columns).to_csv(folder / "gpt-x-MINI-testing.csv", index=False)
    call_command("import_emotionbench_results", "eb", str(tmp_path), "--challenging")
    study = Study.objects.get(slug="eb-mini")
    assert study.questionnaire_settings.instrument.name == "MINI"
    assert study.questionnaire_runs.filter(phase="evoked", situation__index=3).count() == 3
    analysis = emotionbench_analyse(study=study)
    assert {r.category for r in analysis.results} == {"Overall", "Anxiety", "Mood"}
