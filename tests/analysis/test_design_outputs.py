"""Every analysis output cites the frozen design: the report and design.json, the export files and responses."""

import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from analysis.design import HEADER_AMENDMENTS, HEADER_SHA
from studies.design import design_current, design_freeze, study_amend


@pytest.fixture
def amended_study(rated_study):
    design_freeze(rated_study, reason="launch")
    study_amend(study=rated_study, field="hypotheses", value="GPT-4 is rated Good more often.", reason="typo",
                author="ann")  # fmt: skip
    return rated_study


def test_the_report_and_design_json_carry_the_hash_and_the_amendments(amended_study, tmp_path, capsys):
    call_command("analyze", amended_study.slug, "--out", str(tmp_path), "--bootstrap", "50")
    sha = design_current(amended_study).sha256
    out = capsys.readouterr().out
    assert f"design sha256 {sha} (1 amendment(s))" in out and "hypotheses" in out
    report = (tmp_path / "report.html").read_text()
    assert sha in report and "typo" in report
    design = json.loads((tmp_path / "design.json").read_text())
    assert design["sha256"] == sha and design["amendments"][0]["author"] == "ann"


def test_rerunning_the_analysis_reproduces_every_table_exactly(amended_study, tmp_path):
    for run in ("a", "b"):
        call_command("analyze", amended_study.slug, "--out", str(tmp_path / run), "--bootstrap", "50")
    tables = sorted(p.name for p in (tmp_path / "a").glob("*.csv"))
    assert tables and all(
        (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes() for n in tables
    )


def test_every_export_carries_the_hash(amended_study, analyst_client, tmp_path, capsys):
    sha = design_current(amended_study).sha256
    target = tmp_path / "ratings.csv"
    call_command("export", amended_study.slug, "--what", "ratings", "--out", str(target))
    assert json.loads((tmp_path / "ratings.csv.design.json").read_text())["sha256"] == sha
    assert sha in capsys.readouterr().err
    for url in (
        reverse("analysis:export", args=[amended_study.slug, "participants"]),
        reverse("api:study-export", args=[amended_study.slug, "ratings"]),
    ):
        response = analyst_client.get(url, HTTP_ACCEPT="text/csv")
        assert response[HEADER_SHA] == sha
        assert "hypotheses" in json.loads(response[HEADER_AMENDMENTS])[0]


def test_an_unfrozen_study_says_so(rated_study, tmp_path):
    call_command("analyze", rated_study.slug, "--out", str(tmp_path), "--bootstrap", "20")
    assert json.loads((tmp_path / "design.json").read_text())["sha256"] is None
    assert "Design not frozen yet" in (tmp_path / "report.html").read_text()
