"""Copies and follow-up waves (studies/waves.py): what they take from their source, what they refuse, and the
family rule for participants."""

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from generation.models import LLMConditionConfig, Provider
from studies.design import design_build, design_current, design_freeze
from studies.models import Condition, Participant, Response, Study
from studies.participants import AlreadyInFamily, StudyFull, participant_enroll
from studies.services import study_close, study_launch
from studies.waves import StudyCopyError, family_members, seen_in_family, study_copy, study_extend
from tests.factories import ParticipantFactory

from .helpers import DATASET
from .test_design import ready_study

pytestmark = pytest.mark.django_db


def llm_study(slug="src") -> Study:
    study = ready_study(slug=slug, consent_text="Consent A", instructions_text="Read this", seed=5,
                        worked_examples=[{"emotion": "sad", "rating": 3}], ask_teq=True,
                        completion_code="DONE1", screened_out_code="SCR1")  # fmt: skip
    provider = Provider.objects.create(name="loop", api_key_env="LOOP_KEY")
    gpt = study.conditions.get(name="gpt4")
    LLMConditionConfig.objects.create(condition=gpt, provider=provider, model="m-1", temperature=0.3, seed=9)
    Response.objects.filter(condition=gpt).update(source=Response.Source.GENERATED)
    return study


def test_a_copy_is_a_draft_with_the_same_design():
    source = llm_study()
    study_launch(study=source)
    copy = study_copy(source=source, new_slug="copy1")
    assert copy.state == Study.State.DRAFT and copy.parent is None and copy.launched_at is None
    for field in (
        "consent_text",
        "instructions_text",
        "worked_examples",
        "scale",
        "seed",
        "completion_code",
        "screened_out_code",
        "hypotheses",
        "planned_analysis",
        "items_per_participant",
    ):
        assert getattr(copy, field) == getattr(source, field), field  # fmt: skip
    a, b = design_build(source), design_build(copy)
    for key in ("fields", "conditions", "prompts", "attention_checks", "quotas", "planned_analysis"):
        assert a[key] == b[key], key
    assert LLMConditionConfig.objects.get(condition__study=copy).model == "m-1"
    # imported texts come along; generated ones are generated again for the copy
    assert copy.conditions.get(name="human").responses.count() == 4
    assert not copy.conditions.get(name="gpt4").responses.exists()
    assert design_current(copy) is None


def test_a_copy_refuses_a_taken_slug_and_writes_nothing():
    source = llm_study()
    with pytest.raises(StudyCopyError, match="already exists"):
        study_copy(source=source, new_slug=source.slug)
    assert Study.objects.count() == 1


def test_the_copy_command(capsys):
    llm_study(slug="src2")
    call_command("study_copy", "src2", "src2-again")
    assert "src2-again" in capsys.readouterr().out and Study.objects.get(slug="src2-again").state == "draft"
    with pytest.raises(CommandError, match="no study"):
        call_command("study_copy", "nope", "x")


def closed_parent() -> Study:
    parent = llm_study(slug="parent")
    study_launch(study=parent)
    for i in range(20):
        ParticipantFactory(study=parent, condition=parent.conditions.get(name="human"), external_id=f"old{i}",
                           status=Participant.Status.COMPLETED)  # fmt: skip
    study_close(study=parent)
    return parent


def launched_wave(parent: Study) -> Study:
    """A live wave of `parent` with one new LLM condition that answered every prompt."""
    wave = study_extend(parent=parent, new_slug="wave1", conditions=["llama"])
    llama = wave.conditions.get(name="llama")
    for prompt in wave.prompts.all():
        Response.objects.create(prompt=prompt, condition=llama, text=f"llama says {prompt.dialogue_id}")
    study_launch(study=wave)
    return wave


def test_a_wave_has_the_parents_prompts_new_conditions_and_a_rerating_share():
    parent = closed_parent()
    wave = study_extend(parent=parent, new_slug="wave1", conditions=["llama", "qwen"], rerate_share=0.1)
    assert wave.parent == parent and wave.state == "draft" and wave.rerate_share == 0.1
    names = list(wave.conditions.order_by("position").values_list("name", "kind", "quota"))
    assert names == [("human_rerate", "human", 2), ("llama", "llm", 10), ("qwen", "llm", 10)]
    assert sorted(wave.prompts.values_list("dialogue_id", flat=True)) == ["d0", "d1", "d2", "d3"]
    rerate = wave.conditions.get(name="human_rerate")
    assert sorted(rerate.responses.values_list("text", flat=True)) == sorted(
        parent.conditions.get(name="human").responses.values_list("text", flat=True)
    )
    assert design_build(wave)["parent"] == {"study": "parent", "design_sha256": design_current(parent).sha256}
    assert [s.slug for s in family_members(wave)] == ["parent", "wave1"]
    like = study_extend(parent=parent, new_slug="wave2", conditions=["gpt5"], like="gpt4")
    assert LLMConditionConfig.objects.get(condition__study=like, condition__name="gpt5").model == "m-1"
    assert [s.slug for s in family_members(parent)] == ["parent", "wave1", "wave2"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"conditions": []}, "at least one"),
        ({"conditions": ["gpt4"]}, "already used"),
        ({"conditions": ["a", "a"]}, "already used"),
        ({"conditions": ["a"], "rerate_share": 0}, "share"),
        ({"conditions": ["a"], "like": "human"}, "no LLM condition"),
    ],
)
def test_a_bad_wave_is_refused_and_writes_nothing(kwargs, message):
    parent = closed_parent()
    with pytest.raises(StudyCopyError, match=message):
        study_extend(parent=parent, new_slug="w", **kwargs)
    assert not Study.objects.filter(slug="w").exists()


def test_a_wave_is_not_extended_its_root_is():
    parent = closed_parent()
    wave = study_extend(parent=parent, new_slug="w1", conditions=["a"])
    Study.objects.filter(pk=wave.pk).update(state=Study.State.CLOSED)
    design_freeze(wave, reason="launch")
    with pytest.raises(StudyCopyError, match="extend the family's first study 'parent'"):
        study_extend(parent=wave, new_slug="w2", conditions=["b"])


def test_a_draft_cannot_be_extended():
    with pytest.raises(StudyCopyError, match="draft"):
        study_extend(parent=llm_study(), new_slug="w", conditions=["a"])


def test_the_extend_command(capsys):
    closed_parent()
    call_command(
        "study_extend", "parent", "w1", "--condition", "llama", "--condition", "qwen", "--rerate-share", "0.2"
    )
    out = capsys.readouterr().out
    assert "human_rerate: human, quota 4" in out and "generate_responses w1" in out
    with pytest.raises(CommandError, match="already exists"):
        call_command("study_extend", "parent", "w1", "--condition", "x")


def test_a_participant_of_the_family_cannot_join_a_wave():
    wave = launched_wave(closed_parent())
    assert seen_in_family(wave, "old1") and not seen_in_family(wave, "new1")
    with pytest.raises(AlreadyInFamily) as caught:
        participant_enroll(study=wave, external_id="old1")
    assert not isinstance(caught.value, StudyFull) and not wave.participants.exists()
    assert participant_enroll(study=wave, external_id="new1").condition is not None
    Study.objects.filter(pk=wave.pk).update(family_exclusive=False)
    wave.refresh_from_db()
    assert participant_enroll(study=wave, external_id="old2").study == wave


def test_a_participant_of_the_parent_opening_the_waves_link_is_told_why_they_cannot_join(client):
    wave = launched_wave(closed_parent())
    url = reverse("ratings:entry", kwargs={"slug": wave.slug})
    response = client.get(url, {"PROLIFIC_PID": "old1", "STUDY_ID": "s", "SESSION_ID": "x"})
    page = response.content.decode()
    assert response.status_code == 200
    assert "You took part in an earlier study of this series" in page
    assert "All places are taken" not in page and "try again" not in page.lower()
    assert not wave.participants.exists()


def test_admin_duplicate_extend_and_family(staff_client):
    parent = closed_parent()
    changelist = reverse("admin:studies_study_changelist")
    staff_client.post(changelist, {"action": "duplicate_selected", "_selected_action": [parent.pk]})
    assert Study.objects.get(slug="parent-copy").state == "draft"
    url = reverse("admin:studies_study_extend", args=[parent.pk])
    assert staff_client.get(url).status_code == 200
    bad = staff_client.post(url, {"new_slug": "w9", "conditions": "gpt4", "rerate_share": "0.1"})
    assert bad.status_code == 200 and "already used" in bad.content.decode()
    response = staff_client.post(url, {"new_slug": "w9", "conditions": "llama, qwen", "rerate_share": "0.1"})
    wave = Study.objects.get(slug="w9")
    assert response.status_code == 302 and wave.parent == parent
    page = staff_client.get(reverse("admin:studies_study_family", args=[wave.pk])).content.decode()
    assert "parent" in page and "w9" in page and "human_rerate" in page and "/analysis/w9/" in page


def test_a_wave_of_an_imported_study_works_without_launch():
    study = ready_study(slug="imported")
    Study.objects.filter(pk=study.pk).update(state=Study.State.CLOSED)
    design_freeze(study, reason="import of a finished study")
    wave = study_extend(parent=study, new_slug="imp-wave", conditions=["m"])
    assert wave.conditions.filter(kind=Condition.Kind.LLM).count() == 1


def test_a_wave_of_the_published_study_needs_the_new_conditions_share_plus_the_rerating_share(capsys):
    """The published human baseline (200 raters × 10 ratings per condition), extended with two new models: the
    wave asks 2 × 2000 ratings for the new conditions + 10 % of the baseline's 2000 re-rated, against 5 × 2000
    for a full re-run of the same design with the two new models."""
    call_command("import_ratings", "published", DATASET, stdout=io.StringIO(), stderr=io.StringIO())
    published = Study.objects.get(slug="published")
    assert design_current(published).reason == "import of a finished study"
    wave = study_extend(parent=published, new_slug="published-w1", conditions=["gpt5", "llama4"])
    per = wave.items_per_participant
    wave_ratings = sum(c.effective_quota for c in wave.conditions.all()) * per
    full_rerun = (published.conditions.count() + 2) * published.quota_per_condition * per
    assert (per, wave.conditions.get(name="human_rerate").quota) == (10, 20)
    assert (wave_ratings, full_rerun) == (4200, 10000)
    assert wave_ratings <= 2 / 5 * full_rerun + 0.10 * 2000
    assert wave.prompts.count() == published.prompts.count() == 2000


def test_the_wave_form_offers_the_parents_llm_conditions_to_start_from(staff_client):
    parent = closed_parent()
    url = reverse("admin:studies_study_extend", args=[parent.pk])
    page = staff_client.get(url).content.decode()
    assert '<select name="like"' in page and '<option value="gpt4">' in page
    assert '<option value="human">' not in page  # the baseline has no model to start from
    refused = staff_client.post(
        url, {"new_slug": "w3", "conditions": "gpt6", "rerate_share": "0.1", "like": "x"}
    )
    assert "Select a valid choice" in refused.content.decode()
    staff_client.post(url, {"new_slug": "w3", "conditions": "gpt6", "rerate_share": "0.1", "like": "gpt4"})
    assert LLMConditionConfig.objects.get(condition__study__slug="w3", condition__name="gpt6").model == "m-1"
