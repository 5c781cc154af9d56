"""The whole re-run, end to end, on the published study (scripts/wave_demo.py's steps, which a new user runs
with `python scripts/wave_demo.py`).

Import the published ratings (`import_ratings`), extend them with two new LLM conditions served by a loopback
provider, generate, launch, send 30 simulated participants through the real participant pages, and analyse: each
new condition against the published human baseline, with the drift test. The human ratings the wave needs are
no more than the new conditions' share of a full re-run of the same design plus the re-rating share.

It runs on the published file's first 20 raters per condition (200 prompts, so 400 generated responses instead of
4,000): the same design and every step's code, a tenth of the generation. The whole file's figures (the paper's
Good shares, 4,200 of 10,000 human ratings for this wave) are checked by tests/studies/test_waves.py and
tests/analysis/test_exclusions.py."""

import csv
import json

import pytest

from scripts.wave_demo import NEW_CONDITIONS, PARENT, WAVE, loopback_provider, wave_demo_run
from studies.models import Participant, Response, Study
from tests.studies.helpers import published_cut

pytestmark = pytest.mark.django_db

RATERS = 20  # per condition in the cut: 200 prompts, 200 ratings of each published condition


def test_a_wave_of_the_published_study_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setenv("WAVE_DEMO_API_KEY", "sk-loopback-demo")
    dataset = published_cut(tmp_path, raters=RATERS)
    with open(dataset, newline="", encoding="utf-8") as f:
        human = [row["rating_human"] for row in csv.DictReader(f)]
    with loopback_provider() as url:
        figures = wave_demo_run(
            provider_url=url,
            participants=30,
            out_dir=tmp_path / "analysis",
            dataset=dataset,
            bootstrap=200,
            threads=1,
        )
    wave = Study.objects.get(slug=WAVE)
    assert wave.parent.slug == PARENT and wave.state == Study.State.LIVE
    # Generated through the loopback provider, every prompt, for each new condition only.
    for name in NEW_CONDITIONS:
        generated = Response.objects.filter(condition__study=wave, condition__name=name, source="generated")
        assert generated.count() == wave.prompts.count() == 10 * RATERS
    assert figures["participants"] == 30 == Participant.objects.filter(study=wave, status="completed").count()
    assert figures["ratings_collected"] == 30 * wave.items_per_participant

    # Each new condition against the published human baseline (its 200 stored ratings in the cut).
    tested = {line["condition"] for line in figures["new_conditions"]}
    assert tested == {f"{name} · {WAVE} ({wave.launched_at:%Y-%m-%d})" for name in NEW_CONDITIONS}
    for line in figures["new_conditions"]:
        # the baseline's Good share, counted here from the file
        assert line["Good_share_baseline"] == pytest.approx(human.count("3") / len(human), abs=1e-4)
        assert line["ratings"] > 0 and line["p_adjusted"] >= line["p"]
    drift = figures["drift"]
    assert (
        drift["n_original"] == len(human) == 10 * RATERS and drift["n_rerated"] > 0 and drift["p"] is not None
    )

    # 2 new conditions × 20 raters × 10 + 2 re-raters (10 % of 20) × 10, against 5 × 20 × 10 for a full re-run.
    needed = figures["human_ratings_needed"]
    assert (needed["wave_at_full_quota"], needed["full_rerun_of_the_design"]) == (420, 1000)
    assert needed["wave_at_full_quota"] <= needed["goal"]
    assert (
        json.loads((tmp_path / "analysis" / "design.json").read_text())["sha256"] == figures["design_sha256"]
    )
    print(json.dumps(figures, indent=2, ensure_ascii=False))
