"""The pre-registration and the analysis read one declaration of each kind's planned analysis: the test the
pre-registration names as primary is the one the kind's analysis reports as primary (studies/kinds/base.py
`AnalysisPlan`, frozen in the design at launch)."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from analysis import stats
from analysis.services import AnalysisOptions, analysis_entry, study_analyze
from kinds.pairwise.report import TABLE_BY_KEY
from kinds.questionnaire.analysis import emotionbench_analyse
from kinds.questionnaire.report import emotionbench_report_text
from kinds.rating.report import headline_lines, report_context
from studies.design import design_freeze
from studies.kinds import kind_named
from studies.models import Instrument, Situation, StudyDesign, StudySituation
from studies.prereg import prereg_context, prereg_markdown
from tests.analysis.builders import Rated, build_rating_study
from tests.analysis.test_pairwise_analysis import votes
from tests.emotionbench.conftest import panas_definition, situations_definition
from tests.factories import pairwise_study_build, questionnaire_study_create

pytestmark = pytest.mark.django_db


def _rated(condition: str, goods: int, n: int = 6) -> Rated:
    return Rated(condition, [("sad", 3 if i < goods else 1, 4000) for i in range(n)])


def _rating_study():
    people = [_rated("human", 2, 6) for _ in range(6)] + [_rated("gpt", 4, 6) for _ in range(6)]
    return build_rating_study(
        slug="decl", conditions=["human", "gpt"], participants=people, baseline="human"
    ).study


def test_a_rating_study_reports_as_primary_the_test_its_preregistration_names():
    study = _rating_study()
    design_freeze(study, reason="launch")
    prereg = prereg_context(study)
    analysis = study_analyze(study=study, options=AnalysisOptions(bootstrap_samples=50))
    assert prereg["primary_test"] == analysis.primary_test["name"]
    assert "participant-clustered" in prereg["primary_test"]
    assert f"- Primary test: {prereg['primary_test']}" in prereg_markdown(study)
    assert "chi-square" not in prereg["primary_test"]
    main = analysis.main_tests()
    assert main.iloc[0]["test"] == stats.TEST_BY_KEY[analysis.primary_test["key"]] == stats.TEST_CLUSTERED
    assert prereg["primary_test"] in report_context(analysis, inline_figures=False)["primary_line"]
    assert headline_lines(analysis)[0].startswith("gpt:")

    # A design frozen with another primary test: the pre-registration and the analysis both follow it.
    frozen = StudyDesign.objects.get(study=study)
    frozen.design["analysis_plan"]["primary"] = {"key": "omnibus", "name": "omnibus chi-square, declared"}
    frozen.save(update_fields=["design"])
    analysis = study_analyze(study=study, options=AnalysisOptions(bootstrap_samples=50))
    assert (
        prereg_context(study)["primary_test"]
        == analysis.primary_test["name"]
        == "omnibus chi-square, declared"
    )
    assert set(analysis.primary_rows()["test"]) == {stats.TEST_OMNIBUS}
    assert analysis.main_tests().iloc[0]["test"] == stats.TEST_OMNIBUS


def test_a_pairwise_study_reports_as_primary_the_bradley_terry_test_its_preregistration_names(tmp_path):
    study = pairwise_study_build(
        conditions=3, prompts=12, items_per_participant=6, quota_per_condition=100, known_answers=(2,)
    )
    votes(study, 8)
    design_freeze(study, reason="launch")
    prereg = prereg_context(study)
    result = analysis_entry(study=study).result(study, AnalysisOptions(bootstrap_samples=20))
    assert prereg["primary_test"] == result["primary_test"]["name"]
    assert prereg["primary_test"].startswith("Bradley–Terry")
    assert result["primary_table"] == "bt_scores" and not result["bt_scores"].empty
    call_command("analyze", study.slug, "--out", str(tmp_path), "--bootstrap", "20")
    assert f'"name": "{prereg["primary_test"]}"' in (tmp_path / "summary.json").read_text()


def test_a_questionnaire_study_reports_as_primary_the_change_test_its_preregistration_names(tmp_path):
    for name, data in (("q.json", [panas_definition()]), ("s.json", situations_definition())):
        (tmp_path / name).write_text(json.dumps(data), encoding="utf-8")
    call_command("import_instruments", str(tmp_path / "q.json"))
    call_command("import_situations", str(tmp_path / "s.json"))
    study = questionnaire_study_create(slug="q-decl", title="Q", instrument=Instrument.objects.first())
    StudySituation.objects.create(study=study, situation=Situation.objects.first())
    design_freeze(study, reason="launch")
    prereg = prereg_context(study)
    analysis = emotionbench_analyse(study=study)
    assert prereg["primary_test"] == analysis.primary_test["name"]
    assert analysis.primary_test["key"] == "change" and "paired t-test" in prereg["primary_test"]
    assert f"Primary test (as pre-registered): {prereg['primary_test']}" in emotionbench_report_text(
        analysis=analysis
    )


def test_every_declared_test_of_the_rating_and_pairwise_kinds_is_one_their_analysis_reports():
    rating, pairwise = kind_named("rating").analysis_plan, kind_named("pairwise").analysis_plan
    assert rating.primary.key in stats.TEST_BY_KEY
    assert {t.key for t in rating.secondary} - set(stats.TEST_BY_KEY) == {"bootstrap"}  # its own table
    assert {t.key for t in (pairwise.primary, *pairwise.secondary)} <= set(TABLE_BY_KEY)
