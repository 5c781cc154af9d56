"""The authenticity flag in the analysis: a declared exclusion rule with its differential-exclusion test, and the
sensitivity line (the headline with and without the flagged participants) whether the rule is declared or not."""

import pytest

from analysis.services import AnalysisOptions, study_analyze
from studies.exclusion_rules import default_exclusion_rules
from studies.models import ParticipantAuthenticity
from tests.analysis.builders import Rated, build_rating_study

pytestmark = pytest.mark.django_db


def _study(slug: str, *, declared: bool):
    # 20 people per condition; in gpt4, 8 "participants" answer Good to everything and are flagged; in human, 1 is.
    people = [Rated("human", [("sad", 1 + (i + k) % 3, 6000) for k in range(5)]) for i in range(20)]
    people += [Rated("gpt4", [("sad", 1 + (i + k) % 3, 6000) for k in range(5)]) for i in range(12)]
    people += [Rated("gpt4", [("sad", 3, 900)] * 5) for _ in range(8)]
    rules = {**default_exclusion_rules(), "authenticity": declared}
    built = build_rating_study(
        slug=slug, conditions=["human", "gpt4"], participants=people, baseline="human", exclusion_rules=rules
    )
    flagged = [built.participants[0], *built.participants[32:40]]
    for participant in flagged:
        ParticipantAuthenticity.objects.create(participant=participant, score=20, flagged=True, excluded=True)
    return built.study


def test_the_declared_rule_drops_flagged_participants_and_tests_whether_they_differ_by_condition():
    result = study_analyze(
        study=_study("declared", declared=True), options=AnalysisOptions(bootstrap_samples=20)
    )
    line = result.exclusions.set_index("rule").loc["authenticity"]
    assert line["participants"] == 9 and line["participants_human"] == 1 and line["participants_gpt4"] == 8
    assert line["test"] and line["differs"]  # 1/20 against 8/20
    assert any("Exclusion rates differ between conditions for authenticity" in w for w in result.warnings)
    assert result.n_rows == 31 * 5
    assert result.authenticity_lines[0].startswith(
        "With the 9 participants the authenticity score flags: human"
    )
    assert result.authenticity_lines[1].startswith("Without them: human")
    assert result.authenticity_lines[-1].startswith("Authenticity flags by condition: human 1/20, gpt4 8/20")


def test_without_the_rule_the_analysis_keeps_them_and_the_sensitivity_line_says_what_dropping_them_changes():
    result = study_analyze(
        study=_study("undeclared", declared=False), options=AnalysisOptions(bootstrap_samples=20)
    )
    line = result.exclusions.set_index("rule").loc["authenticity"]
    assert line["note"] == "rule off" and result.n_rows == 40 * 5
    with_them = result.authenticity_sensitivity.set_index("condition").loc["gpt4"]
    assert with_them["pct_Good_without"] > with_them["pct_Good_with"]  # "without" side = with the flagged
    assert any("depends on the participants the authenticity score flags" in s or "same conclusion" in s
               for s in result.authenticity_lines)  # fmt: skip


def test_a_review_that_clears_a_flag_keeps_the_participant():
    study = _study("cleared", declared=True)
    ParticipantAuthenticity.objects.filter(participant__study=study).update(review="cleared", excluded=False)
    result = study_analyze(study=study, options=AnalysisOptions(bootstrap_samples=20))
    assert result.exclusions.set_index("rule").loc["authenticity", "participants"] == 0
    assert result.authenticity_lines == [
        "No participant is flagged by the authenticity score: the headline does not depend on it."
    ]
