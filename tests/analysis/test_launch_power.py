"""Power on the launch page: participants per condition for 80 % and 90 % power (study_power_plan's figures),
the shares assumed and their source, and with a judge measured against people, the figures under PPI."""

import re

import pytest
from django.urls import reverse

from analysis import power
from analysis.study_power import study_power_plan
from kinds.rating import launch_power
from studies.models import Condition, Prompt, Response, Study
from tests.analysis.builders import two_emotions_rated

from .builders import build_rating_study, participants_from_counts
from .judge_builders import judge_create, judge_ratings_create

pytestmark = pytest.mark.django_db


def draft_study(slug: str, parent: Study | None = None, prompts: int = 400) -> Study:
    study = Study.objects.create(
        slug=slug, title=f"Draft {slug}", state=Study.State.DRAFT, completion_code="DONE123", parent=parent
    )
    conds = [
        Condition.objects.create(study=study, name="human", is_baseline=True, position=0),
        Condition.objects.create(study=study, name="gpt5", position=1),
        Condition.objects.create(study=study, name="llama4", position=2),
    ]
    emotion = parent.prompts.first().emotion if parent else None
    if emotion is None:
        from studies.models import Emotion

        emotion, _ = Emotion.objects.get_or_create(name="sad", defaults={"valence": "negative"})
    made = Prompt.objects.bulk_create(
        [
            Prompt(study=study, dialogue_id=f"d{i}", emotion=emotion, situation="s", speaker_utterance="u")
            for i in range(prompts)
        ]
    )
    Response.objects.bulk_create(
        [Response(prompt=p, condition=c, text="Oh no.") for p in made for c in conds]
    )
    return study


def _cells(page: str) -> list[str]:
    return re.findall(r"<td[^>]*>([^<]*)</td>", page.split("Power before launch", 1)[1])


def test_the_launch_page_shows_the_plan_without_a_judge(staff_client):
    study = draft_study("plan-only")
    page = staff_client.get(reverse("admin:studies_study_state", args=[study.pk, "launch"])).content.decode()
    assert (
        "Power before launch" in page
        and "seed study (human)" in page
        and "seed study (chatgpt_empathy)" in page
    )
    plan = study_power_plan(study=study)
    expected = {(ln.condition, ln.test, ln.power): ln.participants_per_condition for ln in plan.lines}
    cells = _cells(page)
    # gpt5's 2×3 line then its Yates line: test name, 80 %, 90 %
    assert cells[:3] == [
        "2×3 χ²",
        str(expected[("gpt5", plan.lines[0].test, 0.8)]),
        str(expected[("gpt5", plan.lines[0].test, 0.9)]),
    ]
    assert "No judge has been measured against people yet" in page
    assert "judge</th>" not in page


def test_a_wave_uses_the_judge_calibrated_on_its_root(staff_client):
    people = two_emotions_rated()
    root = build_rating_study(
        slug="root", conditions=["human", "gpt4"], participants=people, baseline="human"
    ).study
    judge = judge_create(root, name="root-judge")
    judge_ratings_create(judge, agree=0.9, seed=2)
    wave = draft_study("wave", parent=root, prompts=2000)
    found = launch_power.calibrated_judge(study=wave)
    assert found["name"] == "root-judge" and found["responses"] == 200 and found["study"] == "root"
    page = staff_client.get(reverse("admin:studies_study_state", args=[wave.pk, "launch"])).content.decode()
    assert "80 %, judge" in page and "root-judge" in page
    # The baseline's expected shares: the root's stored baseline as people rated it (20 / 40 / 40 %)
    assert (
        "Bad 20.0 %, Okay 40.0 %, Good 40.0 %" in page
        and "stored baseline: human of root (100 ratings)" in page
    )
    context = launch_power.launch_power_context(study=wave)
    for row in context["rows"]:
        assert row["ppi_80"] < row["people_80"] and row["ppi_90"] < row["people_90"]
    # The same figures as study_power's own command would give with that judge
    plan = study_power_plan(
        study=wave,
        shares={"human": [0.2, 0.4, 0.4]},
        judge_correlation=found["correlations"],
        judge_ratio=context["judge"]["ratio"],
        icc=context["plan"].icc,
    )
    expected = {(ln.condition, ln.test, ln.power): ln.ppi_participants_per_condition for ln in plan.lines}
    short = {"2×3 χ²": power.TEST_2X3, "2×2 top vs rest (Yates)": power.TEST_2X2_YATES}
    shown = {
        (row["condition"], short[row["test"]], p): row[f"ppi_{round(p * 100)}"]
        for row in context["rows"]
        for p in (0.8, 0.9)
    }
    assert shown == expected and len(shown) == 8


def test_a_judge_with_too_few_calibrated_responses_is_not_used(db):
    people = participants_from_counts("human", {1: 10, 2: 10, 3: 10})
    root = build_rating_study(slug="small-root", conditions=["human"], participants=people).study
    judge_ratings_create(judge_create(root), agree=1.0)
    wave = draft_study("small-wave", parent=root)
    assert launch_power.calibrated_judge(study=wave) is None  # 30 responses < 50


def test_the_launch_page_says_how_the_power_compares_with_the_quota(staff_client):
    study = draft_study("tiny-quota")
    Study.objects.filter(pk=study.pk).update(quota_per_condition=3)
    study.refresh_from_db()
    context = launch_power.launch_power_context(study=study)
    needed = {
        (ln.condition, ln.power): ln.participants_per_condition for ln in context["plan"].lines if ln.test
    }
    gpt5 = next(note for note in context["quota_notes"] if note["condition"] == "gpt5")
    most_at_80 = max(n for (name, p), n in needed.items() if name == "gpt5" and p == 0.8)
    assert not gpt5["enough"] and gpt5["quota"] == 3 and gpt5["needed"] == most_at_80
    page = staff_client.get(reverse("admin:studies_study_state", args=[study.pk, "launch"])).content.decode()
    assert f"gpt5: the quota of 3 per condition is below the {most_at_80} for 80 %" in page
    assert "would likely miss an effect of the assumed size" in page
    # A quota above what 90 % power needs reaches it.
    Condition.objects.filter(study=study).update(quota=5000)
    notes = launch_power.launch_power_context(study=study)["quota_notes"]
    assert all(note["enough"] for note in notes)
    assert "reaches 90 % power" in notes[0]["text"]


def test_a_wave_plans_from_its_parents_stored_baseline_even_with_few_ratings(db):
    from studies.design import design_freeze
    from studies.waves import study_extend

    people = participants_from_counts("human", {1: 5, 2: 5, 3: 10}, per_participant=5)
    people += participants_from_counts("gpt4", {1: 2, 2: 8, 3: 10}, per_participant=5)
    root = build_rating_study(slug="small-parent", conditions=["human", "gpt4"], participants=people).study
    design_freeze(root, reason="launch")
    wave = study_extend(parent=root, new_slug="small-wave", conditions=["gpt5"])
    context = launch_power.launch_power_context(study=wave)
    plan = context["plan"]
    assert plan.shares[plan.baseline] == pytest.approx([0.25, 0.25, 0.5])  # Bad, Okay, Good of the 20 ratings
    assert (
        plan.share_sources[plan.baseline]
        == "stored baseline: human of small-parent (20 ratings; few, so rough)"
    )
    assert "seed study (human)" not in plan.share_sources.values()


def test_the_quotas_step_and_the_launch_page_recompute_power_on_typed_shares(staff_client):
    study = draft_study("typed", prompts=20)
    quotas = reverse("admin:studies_study_setup_step", args=[study.pk, "quotas"])
    launch = reverse("admin:studies_study_state", args=[study.pk, "launch"])
    default = staff_client.get(quotas).content.decode()
    assert "the shares are the published study" in default and 'value="7.1, 28.1, 64.8"' in default
    typed = {"shares-gpt5": "10, 40, 50"}
    expected = study_power_plan(study=study, shares={"gpt5": [0.1, 0.4, 0.5]})
    needed = {
        (ln.condition, ln.power): ln.participants_per_condition
        for ln in expected.lines
        if ln.test == power.TEST_2X3
    }
    for url in (quotas, launch):
        page = staff_client.get(url, typed).content.decode()
        assert "Bad 10.0 %, Okay 40.0 %, Good 50.0 % <small>(typed on this page)" in page
        assert f"<td>{needed[('gpt5', 0.8)]}</td><td>{needed[('gpt5', 0.9)]}</td>" in page
        assert 'name="shares-gpt5" value="10, 40, 50"' in page
    # Sent back with the defaults as they were filled in: only the changed field counts as typed.
    both = staff_client.get(quotas, {**typed, "shares-human": "17.1, 33.6, 49.3"}).content.decode()
    assert "(seed study (human))" in both and "(typed on this page)" in both
    wrong = staff_client.get(quotas, {"shares-gpt5": "10, 40", "shares-nobody": "50 50"}).content.decode()
    assert "gpt5: the shares must be percentages summing to 100" in wrong
    assert "nobody: not a condition of this plan" in wrong and "(seed study (chatgpt_empathy))" in wrong
