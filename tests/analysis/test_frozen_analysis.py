"""The analysis follows the frozen design: its α, correction and tests come from the design's planned analysis
(the draft's, before launch; the frozen one after, amendments included), the report, the figures and every export
cite the design's hash and its amendments, and re-running the analysis from the frozen design reproduces every
file byte for byte, in a fresh process too."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management import call_command
from statsmodels.stats.multitest import multipletests

from analysis import stats
from analysis.design import HEADER_AMENDMENTS, HEADER_SHA
from analysis.services import AnalysisError, AnalysisOptions, study_analyze
from studies.design import design_current, design_freeze, study_amend
from studies.models import Study

from .builders import build_rating_study, participants_from_counts

ROOT = Path(__file__).resolve().parents[2]


def rated_study(slug="planned") -> Study:
    people = participants_from_counts("human", {1: 20, 2: 20, 3: 10}, emotion="sad")
    people += participants_from_counts("human", {1: 10, 2: 25, 3: 15}, emotion="joyful")
    people += participants_from_counts("gpt4", {1: 10, 2: 20, 3: 20}, emotion="sad")
    people += participants_from_counts("gpt4", {1: 5, 2: 20, 3: 25}, emotion="joyful")
    people += participants_from_counts("llama", {1: 15, 2: 20, 3: 15}, emotion="sad")
    study = build_rating_study(
        slug=slug, conditions=["human", "gpt4", "llama"], baseline="human", participants=people
    ).study
    Study.objects.filter(pk=study.pk).update(state=Study.State.DRAFT)
    study.refresh_from_db()
    return study


def _families_adjusted(tests, method):
    for _, family in tests.groupby(["scope", "test"]):
        ok = family["p"].notna()
        if ok.any():
            expected = multipletests(family.loc[ok, "p"].to_numpy(), method=method)[1]
            assert family.loc[ok, "p_adjusted"].to_numpy() == pytest.approx(expected)


@pytest.mark.django_db
def test_the_analysis_applies_the_planned_alpha_and_correction_draft_then_frozen_then_amended(tmp_path):
    study = rated_study()
    study.planned_analysis = {**study.planned_analysis, "alpha": 0.01, "correction": "bonferroni"}
    study.full_clean()
    study.save()
    options = AnalysisOptions(bootstrap_samples=50)
    draft = study_analyze(study=study, options=options)
    assert (draft.alpha, draft.correction, draft.planned["design_sha256"]) == (0.01, "bonferroni", None)
    _families_adjusted(draft.tests, "bonferroni")
    assert (draft.tests["significant"] == (draft.tests["p_adjusted"] < 0.01)).all()
    # Holm's p-values stay beside them, for reference.
    assert (draft.tests["p_holm"].notna() == draft.tests["p_adjusted"].notna()).all()

    frozen = design_freeze(study, reason="launch")
    # A write that goes around the design's guard does not change what the analysis applies: the frozen design does.
    Study.objects.filter(pk=study.pk).update(
        planned_analysis={"alpha": 0.2, "correction": "none", "tests": []}
    )
    launched = study_analyze(study=Study.objects.get(pk=study.pk), options=options)
    assert (launched.alpha, launched.correction) == (0.01, "bonferroni")
    assert launched.planned["design_sha256"] == frozen.sha256

    Study.objects.filter(pk=study.pk).update(planned_analysis=frozen.design["planned_analysis"])
    amended_to = {**frozen.design["planned_analysis"], "alpha": 0.05, "correction": "holm"}
    study_amend(study=study, field="planned_analysis", value=amended_to, reason="α typed wrong", author="ann")
    study = Study.objects.get(pk=study.pk)
    amended = study_analyze(study=study, options=options)
    assert (amended.alpha, amended.correction) == (0.05, "holm")
    assert amended.planned["design_sha256"] == design_current(study).sha256 != frozen.sha256
    _families_adjusted(amended.tests, "holm")
    assert (amended.tests["p_adjusted"] == amended.tests["p_holm"]).all()
    assert amended.summary()["alpha"] == 0.05 and amended.summary()["correction"] == "holm"

    call_command("analyze", study.slug, "--out", str(tmp_path), "--bootstrap", "50")
    md = (tmp_path / "report.md").read_text()
    html = (tmp_path / "report.html").read_text()
    for text in (md, html):
        assert "α = 0.05; multiple-comparison correction: Holm" in text
        assert design_current(study).sha256 in text and "α typed wrong" in text  # the amendment is listed
        assert (
            "Primary test: each condition" in text and "participant-clustered (GEE-robust) Wald test" in text
        )
        assert "Secondary tests planned: omnibus chi-square (condition × rating)" in text
    assert "p_adjusted" in (tmp_path / "main_tests.csv").read_text().splitlines()[0]


@pytest.mark.django_db
def test_a_bad_planned_analysis_is_refused_with_a_clear_message():
    study = rated_study()
    study.planned_analysis = {"alpha": 1.5, "correction": "holm"}
    with pytest.raises(ValidationError, match="'alpha' is a number between 0 and 1"):
        study.full_clean()
    study.planned_analysis = {"alpha": 0.05, "correction": "sidak-ish"}
    with pytest.raises(ValidationError, match="unknown correction 'sidak-ish'"):
        study.full_clean()
    Study.objects.filter(pk=study.pk).update(planned_analysis={"alpha": "x"})
    with pytest.raises(AnalysisError, match="planned analysis is invalid"):
        study_analyze(study=Study.objects.get(pk=study.pk))


def test_no_correction_leaves_p_values_as_they_are():
    p = np.array([0.01, 0.04, 0.2])
    assert stats.p_adjust(p, "none").tolist() == p.tolist()
    assert stats.p_adjust(p, "bonferroni").tolist() == pytest.approx([0.03, 0.12, 0.6])


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.django_db(transaction=True)  # the fresh process reads committed rows
def test_rerunning_the_analysis_from_the_frozen_design_reproduces_every_file_byte_for_byte(
    tmp_path, staff_client
):
    study = rated_study(slug="repro")
    design_freeze(study, reason="launch")
    study_amend(study=study, field="seed", value=11, reason="seed of the pre-registration", author="ann")
    sha = design_current(study).sha256
    first, second, fresh = tmp_path / "first", tmp_path / "second", tmp_path / "fresh"
    call_command("analyze", "repro", "--out", str(first), "--bootstrap", "100")

    # Later edits that are not part of the design, another study, a cold cache: nothing the figures depend on.
    Study.objects.filter(pk=study.pk).update(title="Renamed later", completion_code="LATER")
    rated_study(slug="other")
    call_command("analyze", "repro", "--out", str(second), "--bootstrap", "100")
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "DJANGO_ENV": "test",
        "PYTHONHASHSEED": "12345",  # another hash seed than this process's
    }
    subprocess.run(
        [sys.executable, "manage.py", "analyze", "repro", "--out", str(fresh), "--bootstrap", "100"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    a, b, c = _files(first), _files(second), _files(fresh)
    figures = [n for n in a if n.endswith((".png", ".svg"))]
    assert len(figures) == 6 and {"report.html", "report.md", "design.json", "main_tests.csv"} <= set(a)
    assert set(a) == set(b) == set(c)
    assert [n for n in a if b[n] != c[n]] == []  # a fresh process (another hash seed) writes the same bytes
    # The title is not part of the design: the reports' headings show the current one, nothing else changes.
    assert [n for n in a if a[n] != b[n].replace(b"Renamed later", b"Study repro")] == []
    assert [n for n in a if a[n] != b[n]] == ["report.html", "report.md"]

    # Every written file names the design: the report and design.json (with the amendment), the figures.
    for name in ("report.html", "report.md", "design.json"):
        text = a[name].decode()
        assert sha in text and "seed of the pre-registration" in text, name
    for name in figures:
        assert f"design sha256 {sha}".encode() in a[name], name
    # Downloads from the dashboard carry the hash and the amendments in their headers.
    for url in ("/analysis/repro/tables/main_tests.csv", "/analysis/repro/figures/ratings_by_condition.svg",
                "/analysis/repro/exports/ratings.csv"):  # fmt: skip
        response = staff_client.get(url)
        assert response.status_code == 200, url
        assert response[HEADER_SHA] == sha and "seed of the pre-registration" in response[HEADER_AMENDMENTS]


def _database_url() -> str:
    db = settings.DATABASES["default"]
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
