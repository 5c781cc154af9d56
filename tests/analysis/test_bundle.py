"""A study's open-science bundle (analysis/bundle.py, `manage.py export_bundle`): the demo studies' bundles
validate (Frictionless, Croissant, Psych-DS), their analysis script re-runs the platform's headline figures from
the bundle's files alone in a fresh virtualenv with no database and no network, the same state gives the same
bytes, participants stay private, and a wave references its parent's answers by hash."""

from __future__ import annotations

import hashlib
import io
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from django.core.management import CommandError, call_command

from analysis.bundle import BundleOptions, bundle_write, bundle_zip
from analysis.services import AnalysisOptions, study_analyze
from kinds.pairwise.analysis import PAIRWISE_ANALYSIS
from kinds.pairwise.models import PairItem
from kinds.rating.demo import PUBLISHED_RATINGS
from studies.demo.seed import demo_seed
from studies.design import study_amend
from studies.kinds import registered_kinds, resolved
from studies.models import Participant, Study
from studies.prereg import OSF_SECTIONS
from studies.waves import study_extend

from .bundle_builders import questionnaire_fill, ratings_fill, votes_fill
from .psychds import psychds_problems

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

BIN = Path(sys.executable).parent
DEMOS = ("demo", "feelings-demo", "pairs-demo", "published-sample")


@pytest.fixture
def seeded(settings, tmp_path) -> dict[str, Study]:
    """The seeded demo studies (`seed_demo`): the three live ones have no answers yet."""
    settings.VAR_DIR = tmp_path / "var"
    demo_seed(base_url="http://testserver")
    return {slug: Study.objects.get(slug=slug) for slug in DEMOS}


@pytest.fixture
def demos(seeded) -> dict[str, Study]:
    """The seeded demo studies, the three live ones with answers."""
    ratings_fill(seeded["demo"], participants=12)
    votes_fill(seeded["pairs-demo"], participants=24)
    questionnaire_fill(seeded["feelings-demo"], participants=10)
    return seeded


@pytest.fixture(scope="session")
def rerun_python(tmp_path_factory):
    """A fresh virtualenv per requirements file holding only its pins, installed by uv from its cache with no
    network (`--offline`): the interpreter the bundle's script runs in."""
    made: dict[str, Path] = {}

    def python_for(requirements: Path) -> Path:
        text = requirements.read_text()
        if text not in made:
            venv = tmp_path_factory.mktemp("rerun-venv")
            subprocess.run([BIN / "uv", "venv", "-q", "--python", sys.executable, venv], check=True)
            subprocess.run(
                [
                    BIN / "uv",
                    "pip",
                    "install",
                    "-q",
                    "--offline",
                    "--python",
                    venv / "bin/python",
                    "-r",
                    requirements,
                ],
                check=True,
            )
            made[text] = venv / "bin/python"
        return made[text]

    return python_for


def no_network() -> list[str]:
    """`unshare -rn`: the command runs in a network namespace of its own (no interface but loopback, down)."""
    try:
        ok = subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0
    except FileNotFoundError:
        ok = False
    return ["unshare", "-rn"] if ok else []


def same(a, b, path: str = "") -> None:
    """Equal structures, numbers within 1e-9."""
    if isinstance(a, dict):
        assert set(a) == set(b), (path, set(a) ^ set(b))
        for key in a:
            same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert a is not None and b is not None and math.isclose(a, b, rel_tol=0, abs_tol=1e-9), (path, a, b)
    else:
        assert a == b, (path, a, b)


def validate(root: Path) -> None:
    frictionless = subprocess.run(
        [BIN / "frictionless", "validate", "--json", "datapackage.json"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    report = json.loads(frictionless.stdout)
    assert report["valid"] and report["stats"]["errors"] == 0, frictionless.stdout[:3000]
    croissant = subprocess.run(
        [BIN / "mlcroissant", "validate", "--jsonld", "croissant.json"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    logged = croissant.stderr.splitlines()
    assert croissant.returncode == 0, croissant.stderr[-3000:]
    assert not [line for line in logged if line[:1] in "EW" and line[1:5].isdigit()], croissant.stderr[-3000:]
    assert psychds_problems(root) == []


def rerun(root: Path, python: Path, out: Path) -> dict:
    """The bundle's script, in `python`'s virtualenv, isolated (-I), with an empty environment and no network."""
    done = subprocess.run(
        [*no_network(), python, "-I", root / "analysis/reproduce.py", "--out", out],
        cwd=out.parent,
        env={"PATH": "/usr/bin:/bin", "HOME": str(out.parent)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads((out / "headline.json").read_text())


def test_the_demo_bundles_validate_and_their_scripts_re_run_the_platforms_headline_from_the_files_alone(
    demos, tmp_path, rerun_python
):
    for slug, study in demos.items():
        root = tmp_path / slug
        bundle_write(study, root)
        validate(root)
        results = json.loads((root / "results/headline.json").read_text())
        again = rerun(root, rerun_python(root / "analysis/requirements.txt"), tmp_path / f"{slug}-rerun")
        same(results, again)
        # Every file is in the manifest with its hash, and the manifest lists nothing else: re-running the
        # script left the bundle as it was.
        manifest = dict(
            line.split("  ")[::-1] for line in (root / "MANIFEST.sha256").read_text().splitlines()
        )
        files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - {"MANIFEST.sha256"}
        assert set(manifest) == files
        assert all(hashlib.sha256((root / f).read_bytes()).hexdigest() == h for f, h in manifest.items())

    published = json.loads((tmp_path / "published-sample-rerun/headline.json").read_text())
    platform = study_analyze(study=demos["published-sample"], options=AnalysisOptions(bootstrap_samples=20))
    assert published["ratings_analysed"] == platform.n_rows == 900
    for row, expected in zip(
        published["distribution"], platform.distribution.to_dict("records"), strict=True
    ):
        assert row["condition"] == expected["condition"]
        for key in ("pct_Bad", "pct_Okay", "pct_Good", "mean"):
            assert abs(row[key] - expected[key]) <= 1e-9
    for row, expected in zip(published["change"], platform.change.to_dict("records"), strict=True):
        assert abs(row["change"] - expected["change"]) <= 1e-9
    # … which are the published ratings' own shares: the sample's file, read directly.
    source = pd.read_csv(PUBLISHED_RATINGS)
    for row in published["distribution"]:
        ratings = source[f"rating_{row['condition']}"]
        assert abs(row["pct_Good"] - 100 * (ratings == 3).mean()) <= 1e-9
        assert abs(row["mean"] - ratings.mean()) <= 1e-9

    strengths = json.loads((tmp_path / "pairs-demo-rerun/headline.json").read_text())["strengths"]
    study = demos["pairs-demo"]
    scores = PAIRWISE_ANALYSIS.result(study, AnalysisOptions(seed=study.seed))["bt_scores"]
    assert len(strengths) == 3 and len({row["strength"] for row in strengths}) == 3
    for row, expected in zip(strengths, scores.to_dict("records"), strict=True):
        assert row["condition"] == expected["condition"]
        for key in ("strength", "ci_low", "ci_high", "se"):
            assert abs(row[key] - expected[key]) <= 1e-9


def test_two_exports_of_the_same_state_are_byte_identical(seeded, tmp_path):
    demos = seeded
    ratings_fill(demos["demo"], participants=3)
    questionnaire_fill(demos["feelings-demo"], participants=3)
    for slug in ("demo", "feelings-demo"):
        bundle_write(demos[slug], tmp_path / f"{slug}-1")
        bundle_write(demos[slug], tmp_path / f"{slug}-2")
        first, second = (tmp_path / f"{slug}-{n}/MANIFEST.sha256" for n in (1, 2))
        assert first.read_bytes() == second.read_bytes()
        zips = [io.BytesIO(), io.BytesIO()]
        for archive in zips:
            bundle_zip(demos[slug], archive)
        assert zips[0].getvalue() == zips[1].getvalue()
    # A new answer changes the answers file, and the manifest with it.
    ratings_fill(demos["demo"], participants=1, seed=9)
    bundle_write(demos["demo"], tmp_path / "demo-3")
    assert (tmp_path / "demo-3/MANIFEST.sha256").read_bytes() != (
        tmp_path / "demo-1/MANIFEST.sha256"
    ).read_bytes()


def test_the_bundle_is_private_by_default_and_holds_free_text_only_when_asked(seeded, tmp_path):
    study = seeded["demo"]
    ratings_fill(study, participants=3)
    Participant.objects.filter(study=study).update(
        demographics={"about": "I live at 12 High Street", "contact": "me@example.net"}
    )
    study_amend(study=study, field="hypotheses", value="Replies by LLMs are rated higher.", reason="typo",
                author="alice@example.org")  # fmt: skip
    bundle_write(study, tmp_path / "private")
    text = "".join(p.read_text() for p in (tmp_path / "private").rglob("*") if p.is_file())
    ids = Participant.objects.filter(study=study).values_list("external_id", flat=True)
    assert not [pid for pid in ids if pid in text]
    assert "High Street" not in text and "alice@example.org" not in text and "me@example.net" not in text
    assert (
        "Free text the participants wrote is left out"
        in (tmp_path / "private/dataset_description.json").read_text()
    )
    deviations = json.loads((tmp_path / "private/documentation/deviations.json").read_text())
    assert [d["field"] for d in deviations] == ["hypotheses"] and deviations[0]["reason"] == "typo"
    prereg = (tmp_path / "private/documentation/preregistration.md").read_text()
    for section in OSF_SECTIONS:
        assert f"## {section}" in prereg
    assert "Replies by LLMs are rated higher." in prereg

    bundle_write(study, tmp_path / "open", BundleOptions(include_free_text=True))
    participants = next((tmp_path / "open/data").glob("*participants*")).read_text()
    assert "High Street" in participants and "me@example.net" not in participants
    validate(tmp_path / "open")


def test_a_wave_references_its_parents_answers_by_hash_and_bad_input_writes_nothing(seeded, tmp_path):
    parent = seeded["pairs-demo"]
    votes_fill(parent, participants=3)
    study_extend(parent=parent, new_slug="pairs-demo-wave", conditions=["gpt_new"], like=None)
    call_command(
        "export_bundle", "pairs-demo", "--out", str(tmp_path / "parent"), "--author", "Ada Lovelace",
        "--author", "Alan Turing", "--license", "CC-BY-NC-4.0", stdout=io.StringIO(),
    )  # fmt: skip
    citation = (tmp_path / "parent/documentation/CITATION.cff").read_text()
    assert (
        '  - name: "Ada Lovelace"\n  - name: "Alan Turing"' in citation
        and 'license: "CC-BY-NC-4.0"' in citation
    )
    package = json.loads((tmp_path / "parent/datapackage.json").read_text())
    assert package["licenses"][0]["path"] == "https://creativecommons.org/licenses/by-nc/4.0/"
    call_command(
        "export_bundle", "pairs-demo", "--wave", "1", "--out", str(tmp_path / "wave"), stdout=io.StringIO()
    )
    answers = next((tmp_path / "parent/data").glob("*answers*"))
    based_on = json.loads((tmp_path / "wave/dataset_description.json").read_text())["isBasedOn"]
    assert based_on["identifier"] == f"sha256:{hashlib.sha256(answers.read_bytes()).hexdigest()}"
    reference = json.loads((tmp_path / "wave/documentation/parent.json").read_text())
    assert reference["study"] == "pairs-demo" and reference["baseline_condition"] == "human"
    assert reference["answers"] == answers.relative_to(tmp_path / "parent").as_posix()

    with pytest.raises(CommandError, match="no wave 2"):
        call_command("export_bundle", "pairs-demo", "--wave", "2", "--out", str(tmp_path / "none"))
    with pytest.raises(CommandError, match="exists"):
        call_command("export_bundle", "pairs-demo", "--out", str(tmp_path / "parent"))
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("export_bundle", "pairs-demo", "--license", "mine", "--out", str(tmp_path / "none"))
    with pytest.raises(CommandError, match="no study"):
        call_command("export_bundle", "nope", "--out", str(tmp_path / "none"))
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "var") == ["parent", "wave"]


def test_votes_that_cannot_give_strengths_yet_give_the_same_note_on_the_platform_and_in_the_script(
    seeded, tmp_path, rerun_python
):
    study = seeded["pairs-demo"]
    votes_fill(study, participants=2)
    for item in PairItem.objects.filter(participant__study=study, known_answer__isnull=True).select_related(
        "left__condition"
    ):  # the human reply always chosen: its strength has no bound
        human_left = item.left.condition.name == "human"
        item.choice = PairItem.Choice.LEFT if human_left else PairItem.Choice.RIGHT
        item.save(update_fields=["choice"])
    bundle_write(study, tmp_path / "early")
    results = json.loads((tmp_path / "early/results/headline.json").read_text())
    assert results["strengths"] == [] and results["note"]
    same(
        results,
        rerun(
            tmp_path / "early", rerun_python(tmp_path / "early/analysis/requirements.txt"), tmp_path / "rerun"
        ),
    )


def test_every_kind_provides_its_bundle_part_and_a_script_that_imports_no_platform_code():
    bundled = [kind for kind in registered_kinds() if kind.bundle]
    assert {kind.name for kind in bundled} >= {"rating", "questionnaire", "pairwise"}
    for kind in bundled:
        part = resolved(kind.bundle)
        script = part.script.read_text()
        assert "django" not in script and "from studies" not in script
        assert set(part.requirements.split()) <= {"numpy==2.4.6", "pandas==3.1.1", "scipy==1.17.1"}
        for source in part.extra_scripts.values():
            assert "django" not in source.read_text()


def test_the_psychds_check_reports_what_breaks_its_rules(tmp_path):
    root = tmp_path / "b"
    (root / "data").mkdir(parents=True)
    description = {"@context": "https://schema.org/", "@type": "Dataset", "name": "n", "description": "d",
                   "variableMeasured": [{"@type": "PropertyValue", "name": n} for n in ("row_id", "x")]}  # fmt: skip
    (root / "dataset_description.json").write_text(json.dumps(description))
    good = root / "data/study-a_description-x_data.csv"
    good.write_text("row_id,x\n1,a\n2,b\n")
    assert psychds_problems(root) == []
    good.write_text("row_id,x,y\n1,a\n1,b,c,d\n")
    (root / "data/answers.csv").write_text("row_id\n1\n")
    (root / "data/study-a_table-x_data.csv").write_bytes("row_id,x\n1,\xe9\n".encode("latin-1"))
    problems = psychds_problems(root)
    for expected in ("column 'y' not in variableMeasured", "row 2 has 2 cells", "row_id is not unique",
                     "answers.csv: not named", "unknown key 'table'", "not UTF-8"):  # fmt: skip
        assert any(expected in p for p in problems), (expected, problems)
    shutil.rmtree(root / "data")
    assert "data/: no data file" in psychds_problems(root)
