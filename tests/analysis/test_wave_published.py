"""The whole re-run, end to end, on the published study (opt-in: WAVE_DEMO=1, it generates 4000 responses).

Import the published ratings (`import_ratings`), extend them with two new LLM conditions served by a loopback
provider, generate, launch, send 30 simulated participants through the real HTTP flow, and analyse: each new
condition against the published human baseline, with the drift test. Prints the human ratings the wave needs
against a full re-run of the same design."""

import io
import os
import random

import pytest
from django.core.management import call_command
from django.test import Client

from generation.models import LLMConditionConfig
from studies.models import Participant, Rating, Study
from studies.services import study_launch
from tests.generation.conftest import make_provider, openai_body
from tests.ops.flow_helpers import enter, hidden_fields, post_step
from tests.studies.helpers import DATASET

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(os.environ.get("WAVE_DEMO") != "1", reason="end-to-end demo: set WAVE_DEMO=1"),
]


def _walk(client: Client, study: Study, pid: str, rng: random.Random) -> None:
    enter(client, study, pid)
    post_step(client, study, {"step": "consent", "decision": "agree"})
    post_step(client, study, {"step": "instructions"})
    post_step(client, study, {"step": "teq", **{f"teq_{n}": "often" for n in range(1, 17)}})
    for _ in range(study.items_per_participant):
        fields = hidden_fields(client.get(f"/s/{study.slug}/step/").content.decode())
        assert fields.get("step") == "items", fields
        post_step(client, study, {**fields, "value": str(rng.choice([1, 2, 2, 3, 3]))})
    assert Participant.objects.get(study=study, external_id=pid).status == "completed"


def test_a_wave_of_the_published_study_end_to_end(httpserver, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("TEST_GEN_API_KEY", "sk-loopback")
    httpserver.expect_request("/v1/chat/completions").respond_with_json(
        openai_body("That sounds really hard; I'm here if you want to talk about it.")
    )
    call_command("import_ratings", "published", DATASET, stdout=io.StringIO(), stderr=io.StringIO())
    call_command("study_extend", "published", "published-w1", "--condition", "gpt5", "--condition", "llama4")
    wave = Study.objects.get(slug="published-w1")
    wave.completion_code = "WAVE1DONE"
    wave.platform = "prolific"
    wave.save()  # a draft: editable
    provider = make_provider(httpserver, kind="openai")
    for name in ("gpt5", "llama4"):
        LLMConditionConfig.objects.create(
            condition=wave.conditions.get(name=name), provider=provider, model=f"{name}-loopback", seed=1
        )
    call_command("generate_responses", "published-w1", "--in-process", "--threads", "4", "--no-progress",
                 stdout=io.StringIO())  # fmt: skip
    study_launch(study=wave)
    rng = random.Random(1)
    for i in range(30):
        _walk(Client(), wave, f"wave-rater-{i:03d}", rng)
    capsys.readouterr()
    call_command("analyze", "published-w1", "--out", str(tmp_path), "--bootstrap", "500", "--no-exclusions")
    out = capsys.readouterr()
    per = wave.items_per_participant
    needed = sum(c.effective_quota for c in wave.conditions.all()) * per
    full = (Study.objects.get(slug="published").conditions.count() + 2) * wave.quota_per_condition * per
    print(out.out, out.err, sep="\n")
    print(
        f"wave ratings collected in this demo: {Rating.objects.filter(assignment__participant__study=wave).count()}"
    )
    print(f"human ratings the wave needs at full quota: {needed}; a full re-run of the design: {full}")
    print((tmp_path / "drift.csv").read_text())
    print((tmp_path / "main_tests.csv").read_text()[:3000])
    assert (tmp_path / "report.html").exists()
