"""The whole re-run, end to end, on the published study (scripts/wave_demo.py's steps, which a new user runs
with `python scripts/wave_demo.py`).

Import the published ratings (`import_ratings`), extend them with two new LLM conditions served by a loopback
provider, generate, launch, send 30 simulated participants through the real participant pages, and analyse: each
new condition against the published human baseline, with the drift test. The human ratings the wave needs are
no more than the new conditions' share of a full re-run of the same design plus the re-rating share."""

import json

import pytest

from scripts.wave_demo import NEW_CONDITIONS, PARENT, WAVE, loopback_provider, wave_demo_run
from studies.models import Participant, Response, Study
from tests.studies.helpers import DATASET

pytestmark = pytest.mark.django_db


def test_a_wave_of_the_published_study_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setenv("WAVE_DEMO_API_KEY", "sk-loopback-demo")
    with loopback_provider() as url:
        figures = wave_demo_run(
            provider_url=url, participants=30, out_dir=tmp_path, dataset=DATASET, bootstrap=200, threads=1
        )
    wave = Study.objects.get(slug=WAVE)
    assert wave.parent.slug == PARENT and wave.state == Study.State.LIVE
    # Generated through the loopback provider, every prompt, for each new condition only.
    for name in NEW_CONDITIONS:
        generated = Response.objects.filter(condition__study=wave, condition__name=name, source="generated")
        assert generated.count() == wave.prompts.count() == 2000
    assert figures["participants"] == 30 == Participant.objects.filter(study=wave, status="completed").count()
    assert figures["ratings_collected"] == 30 * wave.items_per_participant

    # Each new condition against the published human baseline (its 2000 stored ratings).
    tested = {line["condition"] for line in figures["new_conditions"]}
    assert tested == {f"{name} · {WAVE} ({wave.launched_at:%Y-%m-%d})" for name in NEW_CONDITIONS}
    for line in figures["new_conditions"]:
        assert line["Good_share_baseline"] == pytest.approx(
            0.493
        )  # the published human baseline's Good share
        assert line["ratings"] > 0 and line["p_adjusted"] >= line["p"]
    drift = figures["drift"]
    assert drift["n_original"] == 2000 and drift["n_rerated"] > 0 and drift["p"] is not None

    needed = figures["human_ratings_needed"]
    assert (needed["wave_at_full_quota"], needed["full_rerun_of_the_design"]) == (4200, 10000)
    assert needed["wave_at_full_quota"] <= needed["goal"]
    assert json.loads((tmp_path / "design.json").read_text())["sha256"] == figures["design_sha256"]
    print(json.dumps(figures, indent=2, ensure_ascii=False))
