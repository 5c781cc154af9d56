"""The analysis of a follow-up wave: new conditions against the parent's stored baseline, Holm across the family,
and the drift test, with participants walking the real HTTP flow of the wave."""

import json

import pandas as pd
import pytest
from django.core.management import call_command
from django.test import Client

from analysis import snapshots, stats
from analysis.exclusions import ExclusionRules
from analysis.services import AnalysisOptions, study_analyze
from kinds.rating.waves import drift_test
from studies.design import design_freeze
from studies.models import Participant, Response, Study
from studies.services import study_launch
from studies.waves import study_extend
from tests.analysis.builders import build_rating_study, participants_from_counts
from tests.ops.flow_helpers import hidden_fields, post_step, to_first_item

pytestmark = pytest.mark.django_db

# What each condition's raters answer in the wave (the re-raters drift towards Good).
ANSWERS = {"human_rerate": "3", "llama": "3", "qwen": "1"}


def seed_study() -> Study:
    # Few Good ratings originally (6 %): the 8 re-ratings, all Good, then differ from the original ratings of the
    # same responses whichever responses the two re-raters are dealt.
    people = participants_from_counts("human", {1: 17, 2: 30, 3: 3}, emotion="sad")
    people += participants_from_counts("human", {1: 17, 2: 30, 3: 3}, emotion="joyful")
    people += participants_from_counts("gpt4", {1: 10, 2: 20, 3: 20}, emotion="sad")
    study = build_rating_study(
        slug="seed", conditions=["human", "gpt4"], baseline="human", participants=people
    ).study
    Study.objects.filter(pk=study.pk).update(
        items_per_participant=4,
        completion_code="DONE",
        platform="prolific",
        consent_text="You may stop at any time.",
        instructions_text="Rate each reply.",
    )
    study.attention_checks.all().delete()
    study.refresh_from_db()
    design_freeze(study, reason="import of a finished study")
    return study


def walk(client: Client, study: Study, pid: str) -> str:
    participant, _ = to_first_item(client, study, pid)
    answer = ANSWERS[participant.condition.name]
    for _ in range(study.items_per_participant):
        fields = hidden_fields(client.get(f"/s/{study.slug}/step/").content.decode())
        post_step(client, study, {**fields, "value": answer})
    assert Participant.objects.get(pk=participant.pk).status == "completed"
    return participant.condition.name


def test_a_wave_is_analysed_against_the_stored_baseline_with_the_drift_test(
    tmp_path, capsys, django_user_model
):
    parent = seed_study()
    wave = study_extend(parent=parent, new_slug="wave1", conditions=["llama", "qwen"], rerate_share=0.2)
    for name in ("llama", "qwen"):
        condition = wave.conditions.get(name=name)
        Response.objects.bulk_create(
            Response(
                prompt=p, condition=condition, text=f"{name} answers {p.dialogue_id}", source="generated"
            )
            for p in wave.prompts.all()
        )
    study_launch(study=wave)
    walked = [walk(Client(), wave, f"wavepid{i:03d}") for i in range(10)]
    assert walked.count("human_rerate") == 2  # 20 % of the parent's 10 baseline raters

    analysis = study_analyze(
        study=wave, options=AnalysisOptions(rules=ExclusionRules.none(), bootstrap_samples=200)
    )
    date = f"{parent.created_at:%Y-%m-%d}"
    baseline = f"human · seed ({date})"
    assert analysis.baseline == baseline
    assert set(analysis.conditions) == {baseline, f"gpt4 · seed ({date})", *(
        f"{n} · wave1 ({wave.launched_at:%Y-%m-%d})" for n in ("llama", "qwen"))}  # fmt: skip
    overall = analysis.tests[
        (analysis.tests["scope"] == "overall") & (analysis.tests["test"] == stats.TEST_2X2)
    ]
    assert (
        len(overall) == 3 and overall["p_holm"].notna().all()
    )  # gpt4, llama, qwen against the stored baseline
    assert (overall["p_holm"] >= overall["p"]).all()
    drift = analysis.drift.iloc[0]
    assert (drift["n_original"], drift["n_rerated"]) == (100, 8)
    assert drift["Good_share_rerated"] == 1.0 and drift["difference"] > 0 and drift["responses"] == 8
    assert "Rater drift" in analysis.drift_warning

    # By default the wave applies the exclusion rules it declared (copied from its parent, frozen at launch),
    # to the drift test's ratings too.
    declared = study_analyze(study=wave, options=AnalysisOptions(bootstrap_samples=200))
    assert declared.rules_declared and declared.rules == ExclusionRules.from_declared(wave.exclusion_rules)
    assert wave.exclusion_rules == parent.exclusion_rules
    assert len(declared.drift) == 1

    call_command("analyze", "wave1", "--out", str(tmp_path), "--bootstrap", "200", "--no-exclusions")
    assert "WARNING: Rater drift" in capsys.readouterr().out
    family = pd.read_csv(tmp_path / "family.csv")
    assert list(family["study"]) == ["seed", "seed", "wave1", "wave1"]
    assert (tmp_path / "drift.csv").exists() and "Rater drift" in (tmp_path / "report.html").read_text()
    assert json.loads((tmp_path / "design.json").read_text())["sha256"]
    staff = Client()
    staff.force_login(django_user_model.objects.create_user(username="st", is_staff=True, is_superuser=True))
    snapshots.snapshot_compute(study_id=wave.pk, baseline=None, no_exclusions=True)  # what the worker does
    page = staff.get("/analysis/wave1/?exclusions=none").content.decode()
    assert "Rater drift" in page and "human · seed" in page and 'id="design-sha256"' in page


def test_the_drift_test_is_quiet_when_raters_agree():
    scale = stats.Scale.from_study_scale([{"value": 1, "label": "Bad"}, {"value": 2, "label": "Okay"},
                                           {"value": 3, "label": "Good"}])  # fmt: skip

    def frame(values, offset):
        return pd.DataFrame(
            {
                "participant_id": [offset + i // 5 for i in range(len(values))],
                "value": values,
                "response_key": [f"r{i % 40}" for i in range(len(values))],
            }
        )

    original = frame([1, 2, 3, 2, 2] * 8, 0)
    same = frame([1, 2, 3, 2, 2] * 4, 100)
    table, warning = drift_test(original, same, scale, alpha=0.05)
    assert warning == "" and table.iloc[0]["p"] > 0.05 and table.iloc[0]["difference"] == 0
    assert table.iloc[0]["responses"] == 20 and table.iloc[0]["n_original_paired"] == 20
    table, warning = drift_test(original, frame([], 0), scale, alpha=0.05)
    assert table.iloc[0]["note"] == "no re-ratings yet" and warning == ""


def test_the_drift_tests_interval_is_at_the_planned_alpha():
    scale = stats.Scale.from_study_scale([{"value": 1, "label": "Bad"}, {"value": 3, "label": "Good"}])
    original = pd.DataFrame(
        {
            "participant_id": [i // 5 for i in range(40)],
            "value": [1, 3, 3, 1, 1] * 8,
            "response_key": [f"r{i}" for i in range(40)],
        }
    )
    rerated = pd.DataFrame(
        {
            "participant_id": [100 + i // 5 for i in range(20)],
            "value": [3, 3, 3, 1, 3] * 4,
            "response_key": [f"r{2 * i}" for i in range(20)],
        }
    )
    wide, _ = drift_test(original, rerated, scale, alpha=0.01)
    narrow, _ = drift_test(original, rerated, scale, alpha=0.10)
    assert (wide.iloc[0]["ci_level"], narrow.iloc[0]["ci_level"]) == (0.99, 0.9)
    assert (
        wide.iloc[0]["ci_low"] <= narrow.iloc[0]["ci_low"]
        and wide.iloc[0]["ci_high"] >= narrow.iloc[0]["ci_high"]
    )
