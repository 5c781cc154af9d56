"""The frozen design: its canonical JSON and hash, the refusal of every frozen field's edit after launch, and the
recorded amendment (studies/design.py), through the services, the commands and the admin."""

from __future__ import annotations

import copy
import json
import re

import pytest
from django import forms
from django.core.management import CommandError, call_command
from django.db import transaction
from django.urls import reverse

from kinds.rating.kind import RATING
from kinds.rating.models import RatingSettings
from studies.design import (
    FROZEN_CHECK_FIELDS,
    FROZEN_CONDITION_FIELDS,
    FROZEN_STUDY_FIELDS,
    AmendmentError,
    FrozenDesignError,
    canonical_json,
    design_build,
    design_current,
    design_freeze,
    design_sha256,
    study_amend,
)
from studies.models import (
    AttentionCheck,
    Condition,
    Emotion,
    Prompt,
    QuestionnaireSettings,
    Response,
    Study,
    StudyAmendment,
    StudyDesign,
)
from studies.planned_analysis import default_scale
from studies.prereg import prereg_markdown
from studies.services import study_close, study_launch
from tests.factories import (
    AttentionCheckFactory,
    ConditionFactory,
    PromptFactory,
    ResponseFactory,
    StudyFactory,
)

from .test_admin import change_form_data as browser_form_data

pytestmark = pytest.mark.django_db


def ready_study(**fields) -> Study:
    study = StudyFactory(
        **{"items_per_participant": 3, "hypotheses": "LLMs are rated Good more often.", **fields}
    )
    human = ConditionFactory(study=study, name="human", is_baseline=True, position=0)
    gpt = ConditionFactory(study=study, name="gpt4", kind=Condition.Kind.LLM, position=1)
    for i in range(4):
        prompt = PromptFactory(study=study, dialogue_id=f"d{i}")
        ResponseFactory(prompt=prompt, condition=human)
        ResponseFactory(prompt=prompt, condition=gpt)
    AttentionCheckFactory(study=study)
    return study


# One new value per frozen study field (each differs from ready_study's).
STUDY_EDITS = {
    "kind": Study.Kind.QUESTIONNAIRE,
    "consent_text": "Another consent.",
    "instructions_text": "Other instructions.",
    "worked_examples": [
        {"emotion": "sad", "situation": "s", "speaker_utterance": "u", "response": "r", "rating": 3}
    ],
    "scale": [{"value": 2, "label": "Good"}, {"value": 1, "label": "Bad"}],
    "items_per_participant": 4,
    "quota_per_condition": 11,
    "attention_check_max_failures": 1,
    "seed": 7,
    "exclusion_rules": {
        "attention_checks": False,
        "incomplete": True,
        "too_fast": {"min_median_ms": 1500},
        "straight_lining": None,
    },
    "hypotheses": "Another hypothesis.",
    "planned_analysis": {"tests": ["omnibus"], "alpha": 0.01, "correction": "holm"},
    "rerate_share": 0.2,
    "family_exclusive": False,
    "trap_hidden_instruction": True,
    "trap_repeat_items": 2,
    "trap_picture": True,
}
# One new value per field of the rating kind's own settings (kinds/rating/models.py), frozen with the design too.
RATING_SETTINGS_EDITS = {
    "scale_question": "How kind is it?",
    "ask_teq": True,
    "target_ratings_per_response": 2,
}
CONDITION_EDITS = {
    "name": "gpt5",
    "label": "GPT-5",
    "kind": Condition.Kind.HUMAN,
    "is_baseline": True,
    "quota": 3,
}
CHECK_EDITS = {
    "emotion_label": "check",
    "situation": "Other situation.",
    "speaker_utterance": "Other utterance.",
    "response_text": "Choose Good.",
    "expected_value": 3,
    "after_item": 2,
    "after_item_max": 4,
}
PROMPT_EDITS = {"dialogue_id": "d99", "situation": "Changed.", "speaker_utterance": "Changed too."}


def test_every_frozen_field_has_an_edit_in_this_test():
    assert set(STUDY_EDITS) == set(FROZEN_STUDY_FIELDS)
    assert set(CONDITION_EDITS) == set(FROZEN_CONDITION_FIELDS)
    assert set(CHECK_EDITS) == set(FROZEN_CHECK_FIELDS)


def test_the_design_is_canonical_json_hashed_and_lists_everything_frozen():
    study = ready_study()
    design = design_build(study)
    text = canonical_json(design)
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert [c["name"] for c in design["conditions"]] == ["human", "gpt4"]
    assert design["prompts"]["count"] == 4 and len(design["prompts"]["items"][0]["situation_sha256"]) == 64
    assert design["attention_checks"][0]["expected_value"] == 2
    assert design["quotas"]["by_condition"] == {"human": 10, "gpt4": 10}
    assert design["planned_analysis"]["correction"] == "holm" and design["hypotheses"].startswith("LLMs")
    assert "exclusion_rules" in design
    study_launch(study=study)
    frozen = design_current(study)
    assert frozen.reason == "launch" and frozen.sha256 == design_sha256(design) == design_sha256(
        frozen.design
    )


def _frozen(study: Study) -> StudyDesign:
    study_launch(study=study)
    return design_current(study)


@pytest.mark.parametrize("field", sorted(STUDY_EDITS))
def test_a_study_field_edit_changes_the_hash_and_is_refused_after_launch(field):
    draft = ready_study()
    before = design_sha256(design_build(draft))
    setattr(draft, field, copy.deepcopy(STUDY_EDITS[field]))
    assert design_sha256(design_build(draft)) != before

    study = ready_study()
    frozen = _frozen(study)
    study.save()  # a no-op save keeps the design
    assert design_sha256(design_build(Study.objects.get(pk=study.pk))) == frozen.sha256
    setattr(study, field, copy.deepcopy(STUDY_EDITS[field]))
    with pytest.raises(FrozenDesignError, match="frozen design"):
        study.save()
    assert design_sha256(design_build(Study.objects.get(pk=study.pk))) == frozen.sha256


@pytest.mark.parametrize("existing", [True, False], ids=["row", "no-row"])
@pytest.mark.parametrize("field", sorted(RATING_SETTINGS_EDITS))
def test_a_rating_settings_edit_changes_the_hash_and_is_refused_after_launch(field, existing):
    """With a settings row, and without one (the study read the defaults): a row created after launch with
    another value is refused too."""
    assert set(RATING_SETTINGS_EDITS) == {
        f.name for f in RatingSettings._meta.concrete_fields if f.name not in ("id", "study")
    }
    draft = ready_study()
    before = design_sha256(design_build(draft))
    RatingSettings.objects.create(study=draft, **{field: RATING_SETTINGS_EDITS[field]})
    assert design_sha256(design_build(Study.objects.get(pk=draft.pk))) != before

    study = ready_study()
    if existing:
        RatingSettings.objects.create(study=study)
    frozen = _frozen(study)
    own = RATING.settings(Study.objects.get(pk=study.pk))
    own.save()  # a no-op save (or a row of the defaults) keeps the design
    setattr(own, field, RATING_SETTINGS_EDITS[field])
    with pytest.raises(FrozenDesignError, match="frozen design"):
        own.save()
    assert design_sha256(design_build(Study.objects.get(pk=study.pk))) == frozen.sha256


@pytest.mark.parametrize("field", sorted(CONDITION_EDITS))
def test_a_condition_field_edit_changes_the_hash_and_is_refused_after_launch(field):
    draft = ready_study()
    before = design_sha256(design_build(draft))
    condition = draft.conditions.get(name="gpt4")
    setattr(condition, field, CONDITION_EDITS[field])
    condition.save()
    assert design_sha256(design_build(draft)) != before

    study = ready_study()
    frozen = _frozen(study)
    condition = study.conditions.get(name="gpt4")
    condition.enrolling = False  # operations, not design: allowed
    condition.save()
    assert design_sha256(design_build(study)) == frozen.sha256
    setattr(condition, field, CONDITION_EDITS[field])
    with pytest.raises(FrozenDesignError):
        condition.save()
    assert design_sha256(design_build(study)) == frozen.sha256


def test_a_check_without_a_range_is_frozen_as_before_ranges_existed():
    study = ready_study()
    check = study.attention_checks.get()
    assert "after_item_max" not in design_build(study)["attention_checks"][0]
    check.after_item_max = check.after_item + 2
    check.save()
    assert design_build(study)["attention_checks"][0]["after_item_max"] == check.after_item + 2


@pytest.mark.parametrize("field", sorted(CHECK_EDITS))
def test_an_attention_check_edit_changes_the_hash_and_is_refused_after_launch(field):
    draft = ready_study()
    before = design_sha256(design_build(draft))
    check = draft.attention_checks.get()
    setattr(check, field, CHECK_EDITS[field])
    check.save()
    assert design_sha256(design_build(draft)) != before

    study = ready_study()
    frozen = _frozen(study)
    check = study.attention_checks.get()
    check.save()
    assert design_sha256(design_build(study)) == frozen.sha256
    setattr(check, field, CHECK_EDITS[field])
    with pytest.raises(FrozenDesignError):
        check.save()
    with pytest.raises(FrozenDesignError):
        AttentionCheckFactory(study=study)
    assert design_sha256(design_build(study)) == frozen.sha256


@pytest.mark.parametrize("field", [*sorted(PROMPT_EDITS), "emotion"])
def test_a_prompt_edit_changes_the_hash_and_is_refused_after_launch(field):
    other = Emotion.objects.get_or_create(name="nostalgic")[0]
    value = other if field == "emotion" else PROMPT_EDITS[field]
    draft = ready_study()
    before = design_sha256(design_build(draft))
    prompt = draft.prompts.get(dialogue_id="d0")
    setattr(prompt, field, value)
    prompt.save()
    assert design_sha256(design_build(draft)) != before

    study = ready_study()
    frozen = _frozen(study)
    prompt = study.prompts.get(dialogue_id="d0")
    setattr(prompt, field, value)
    with pytest.raises(FrozenDesignError):
        prompt.save()
    with pytest.raises(FrozenDesignError):
        PromptFactory(study=study)
    assert design_sha256(design_build(study)) == frozen.sha256


def test_adding_a_condition_to_a_closed_study_is_refused_with_a_pointer_to_waves():
    study = ready_study()
    study_launch(study=study)
    study_close(study=study)
    with pytest.raises(FrozenDesignError, match="study_extend"):
        Condition.objects.create(study=study, name="claude", kind=Condition.Kind.LLM)
    assert not Condition.objects.filter(study=study, name="claude").exists()


def test_an_amendment_is_recorded_and_changes_the_hash():
    study = ready_study()
    frozen = _frozen(study)
    amendment = study_amend(
        study=study, field="quota_per_condition", value=12, reason="slow recruiting", author="ann"
    )
    study.refresh_from_db()
    assert study.quota_per_condition == 12
    current = design_current(study)
    assert current.sha256 != frozen.sha256 and current.sha256 == design_sha256(design_build(study))
    assert (amendment.old_value, amendment.new_value, amendment.author) == (10, 12, "ann")
    assert (amendment.sha256_before, amendment.sha256_after) == (frozen.sha256, current.sha256)
    assert StudyDesign.objects.filter(study=study).count() == 2


@pytest.mark.parametrize(
    "field, value, reason, message",
    [
        ("completion_code", "X", "why", "cannot be amended"),
        ("kind", "questionnaire", "why", "cannot be amended"),
        ("quota_per_condition", 10, "why", "nothing to amend"),
        ("quota_per_condition", 0, "why", "quota_per_condition"),
        ("quota_per_condition", 12, "  ", "needs a reason"),
        ("scale", [{"value": 2, "label": "Good"}, {"value": 2, "label": "Bad"}], "why", "repeated: 2"),
        ("worked_examples", [{"situation": "s", "speaker_utterance": "u", "response": "r"}], "why", "rating"),
    ],
)
def test_a_bad_amendment_is_refused_and_writes_nothing(field, value, reason, message):
    study = ready_study()
    _frozen(study)
    with pytest.raises(AmendmentError, match=message):
        study_amend(study=study, field=field, value=value, reason=reason, author="ann")
    assert not StudyAmendment.objects.exists() and StudyDesign.objects.count() == 1
    assert Study.objects.get(pk=study.pk).quota_per_condition == 10


def test_a_draft_cannot_be_amended_only_edited():
    study = ready_study()
    with pytest.raises(AmendmentError, match="draft"):
        study_amend(study=study, field="seed", value=3, reason="r", author="ann")
    study.seed = 3
    study.save()  # a draft is edited directly


def test_the_study_design_command_prints_or_writes_the_design_with_its_hash(tmp_path, capsys):
    study = ready_study(slug="designed")
    frozen = _frozen(study)
    call_command("study_design", "designed")
    out, err = capsys.readouterr()
    assert out.strip() == frozen.canonical and frozen.sha256 in err
    target = tmp_path / "design.json"
    call_command("study_design", "designed", "--out", str(target))
    assert json.loads(target.read_text()) == frozen.design
    call_command("study_design", "designed", "--prereg")
    out, _ = capsys.readouterr()
    assert out.startswith("# Pre-registration") and frozen.sha256 in out and "LLMs are rated Good" in out
    with pytest.raises(CommandError, match="no study"):
        call_command("study_design", "nope")


def test_the_study_amend_command_records_an_amendment(capsys):
    study = ready_study(slug="amended")
    _frozen(study)
    call_command(
        "study_amend", "amended", "--field", "scale_question", "--value", "How caring is it?",
        "--reason", "typo", "--author", "ann",
    )  # fmt: skip
    assert RatingSettings.objects.get(study=study).scale_question == "How caring is it?"
    assert "typo" in prereg_markdown(study) and "How caring is it?" in prereg_markdown(study)
    with pytest.raises(CommandError, match="cannot be amended"):
        call_command(
            "study_amend", "amended", "--field", "title", "--value", "x", "--reason", "r", "--author", "a"
        )


# --- the admin ---------------------------------------------------------------------------------------------


def change_form_data(client, study: Study) -> dict:
    """The study's admin change form as the browser would post it unchanged (with its inlines)."""
    response = client.get(reverse("admin:studies_study_change", args=[study.pk]))
    assert response.status_code == 200
    data = {}
    form = response.context["adminform"].form
    for name, field in form.fields.items():
        value = form[name].value()
        if value is None:
            continue
        if isinstance(field.widget, forms.MultiWidget):  # a setting edited as a form: one input each
            for suffix, sub in zip(field.widget.widgets_names, value, strict=True):
                if sub is not None and sub is not False:
                    data[name + suffix] = "on" if sub is True else sub
            continue
        if field.show_hidden_initial:  # fields with a callable default post their initial value too
            data[form[name].html_initial_name] = value
        if isinstance(value, bool):
            if value:
                data[name] = "on"
            continue
        data[name] = value
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        for key, value in formset.management_form.initial.items():
            data[f"{formset.prefix}-{key}"] = value
        for sub in formset.forms:
            for name in sub.fields:
                value = sub[name].value()
                if value is None or value is False:
                    continue
                data[sub.add_prefix(name)] = "on" if value is True else value
    return data


def _errors(response) -> str:
    context = response.context
    return str(context["adminform"].form.errors) + str(
        [(f.formset.errors, f.formset.non_form_errors()) for f in context["inline_admin_formsets"]]
    )


def test_the_admin_refuses_a_frozen_field_with_a_clear_message(staff_client):
    study = ready_study()
    frozen = _frozen(study)
    data = change_form_data(staff_client, study)
    response = staff_client.post(reverse("admin:studies_study_change", args=[study.pk]), data)
    assert response.status_code == 302, _errors(response)  # an unchanged save passes
    data["quota_per_condition"] = "99"
    response = staff_client.post(reverse("admin:studies_study_change", args=[study.pk]), data)
    assert response.status_code == 400
    assert (
        "part of its frozen design" in response.content.decode()
        and "study_amend" in response.content.decode()
    )
    assert Study.objects.get(pk=study.pk).quota_per_condition == 10
    assert design_current(study).sha256 == frozen.sha256


def test_a_browser_saving_a_launched_study_unchanged_is_no_change_of_its_multi_line_texts(staff_client):
    """A browser posts a textarea's line ends as CRLF; the stored text has LF: saving the page unchanged is no
    edit of the frozen consent and instructions, and the stored text keeps LF."""
    study = ready_study()
    Study.objects.filter(pk=study.pk).update(
        consent_text="You may stop at any time.\n\nWe store your answers.",
        instructions_text="Read each reply.\nThen rate it.",
    )
    study.refresh_from_db()
    frozen = _frozen(study)
    data = change_form_data(staff_client, study)
    data["consent_text"] = data["consent_text"].replace("\n", "\r\n")
    data["instructions_text"] = data["instructions_text"].replace("\n", "\r\n")
    response = staff_client.post(reverse("admin:studies_study_change", args=[study.pk]), data)
    assert response.status_code == 302, _errors(response)
    study.refresh_from_db()
    assert study.consent_text == "You may stop at any time.\n\nWe store your answers."
    assert design_current(study).sha256 == frozen.sha256
    data["consent_text"] = "You may stop at any time.\r\nWe keep nothing."
    response = staff_client.post(reverse("admin:studies_study_change", args=[study.pk]), data)
    assert response.status_code == 400 and "part of its frozen design" in response.content.decode()


def test_the_admin_refuses_to_add_or_delete_a_condition_of_a_launched_study(staff_client):
    study = ready_study()
    _frozen(study)
    data = change_form_data(staff_client, study)
    prefix = next(k for k in data if k.endswith("TOTAL_FORMS") and "conditions" in k).removesuffix(
        "-TOTAL_FORMS"
    )
    deleting = {**data, f"{prefix}-1-DELETE": "on"}
    response = staff_client.post(reverse("admin:studies_study_change", args=[study.pk]), deleting)
    assert response.status_code == 400 and "Deleting a condition" in response.content.decode()
    assert study.conditions.count() == 2


def test_the_admin_design_prereg_and_amend_pages(staff_client, staff_user):
    study = ready_study()
    frozen = _frozen(study)
    page = staff_client.get(reverse("admin:studies_study_design", args=[study.pk])).content.decode()
    assert frozen.sha256 in page
    page = staff_client.get(reverse("admin:studies_study_prereg", args=[study.pk])).content.decode()
    assert frozen.sha256 in page and "LLMs are rated Good" in page
    # The exclusion rules in words, never the declaration's JSON.
    assert "<li>Attention checks: participants flagged for failed attention checks</li>" in page
    assert (
        "<li>Too fast: off</li>" in page
        and "&quot;too_fast&quot;" not in page
        and "{" not in page.split('id="exclusion-rules"')[1].split("</ul>")[0]
    )
    md = staff_client.get(reverse("admin:studies_study_prereg", args=[study.pk]) + "?format=md")
    assert md["Content-Type"].startswith("text/markdown") and frozen.sha256 in md.content.decode()
    assert "- Incomplete participation: participants who did not complete" in md.content.decode()
    url, data = amend_form(staff_client, study, "seed")
    assert data["seed"] == "0"  # the current value, in the study page's own number input
    response = staff_client.post(url, {**data, "seed": "5", "reason": ""})
    assert response.status_code == 400 and not StudyAmendment.objects.exists()
    response = staff_client.post(url, {**data, "seed": "5", "reason": "wrong seed typed"})
    assert response.status_code == 302
    amendment = StudyAmendment.objects.get()
    assert amendment.author == staff_user.username and amendment.new_value == 5
    page = staff_client.get(reverse("admin:studies_study_design", args=[study.pk])).content.decode()
    assert "wrong seed typed" in page and amendment.sha256_after in page


def amend_form(client, study: Study, field: str) -> tuple[str, dict[str, str]]:
    """The amendment page of one field and what a browser would post from it unchanged (its inputs)."""
    url = reverse("admin:studies_study_amend", args=[study.pk]) + f"?field={field}"
    response = client.get(url)
    assert response.status_code == 200
    return url, browser_form_data(response.content.decode())


def _unchanged(study: Study, frozen: StudyDesign) -> bool:
    return (
        not StudyAmendment.objects.exists()
        and design_current(study).sha256 == frozen.sha256
        and design_sha256(design_build(Study.objects.get(pk=study.pk))) == frozen.sha256
    )


def test_the_amendment_page_lists_the_frozen_fields_in_words_not_json(staff_client):
    study = ready_study(planned_analysis={"tests": ["omnibus"], "alpha": 0.05, "correction": "fdr_bh"})
    _frozen(study)
    response = staff_client.get(reverse("admin:studies_study_amend", args=[study.pk]))
    page = response.content.decode()
    assert response.status_code == 200 and "JSON" not in page and "{&quot;" not in page
    rows = dict(re.findall(r'<th scope="row"><a href="\?field=(\w+)">([^<]+)</a>', page))
    # The rating study's frozen fields as its page labels them (not the completion code: not frozen).
    assert rows["quota_per_condition"] == "Quota per condition" and rows["scale"] == "Scale"
    assert rows["ask_teq"] == "Ask the Toronto Empathy Questionnaire before rating"
    assert "kind" not in rows and "completion_code" not in rows
    assert "Option 1: Value 3, Label Good</li>" in page  # the scale as a list of its options
    assert "Multiple-comparison correction: Benjamini–Hochberg (FDR)" in page  # a choice by its label
    assert "Exclude participants who failed the attention checks: Yes" in page  # a switch as Yes / No


def test_a_number_is_amended_in_its_own_input_and_a_bad_one_is_refused_on_the_field(staff_client):
    study = ready_study()
    frozen = _frozen(study)
    url, data = amend_form(staff_client, study, "quota_per_condition")
    assert data == {"quota_per_condition": "10", "reason": ""}  # its own input, filled in, and the reason
    for bad, message in [("0", "greater than or equal to 1"), ("many", "Enter a whole number")]:
        response = staff_client.post(url, {**data, "quota_per_condition": bad, "reason": "slow recruiting"})
        assert response.status_code == 400 and message in response.content.decode()
        assert Study.objects.get(pk=study.pk).quota_per_condition == 10 and _unchanged(study, frozen)
    response = staff_client.post(url, {**data, "reason": "slow recruiting"})  # the same value: no amendment
    assert response.status_code == 400 and "already has this value" in response.content.decode()
    response = staff_client.post(url, {**data, "quota_per_condition": "12", "reason": "slow recruiting"})
    assert response.status_code == 302
    amendment = StudyAmendment.objects.get()
    assert (amendment.field, amendment.old_value, amendment.new_value) == ("quota_per_condition", 10, 12)
    assert Study.objects.get(pk=study.pk).quota_per_condition == 12


def test_the_scale_is_amended_in_its_rows_and_a_repeated_value_is_refused(staff_client):
    study = ready_study()
    frozen = _frozen(study)
    url, data = amend_form(staff_client, study, "scale")
    assert (data["scale_0"], data["scale_1"], data["scale_3"]) == ("3", "Good", "Okay")
    response = staff_client.post(url, {**data, "scale_2": "3", "reason": "typo"})  # 3 twice
    assert (
        response.status_code == 400
        and "each value may be used once (repeated: 3)" in response.content.decode()
    )
    assert Study.objects.get(pk=study.pk).scale == default_scale() and _unchanged(study, frozen)
    response = staff_client.post(url, {**data, "scale_3": "Fair", "reason": "the label participants saw"})
    assert response.status_code == 302
    assert [o["label"] for o in Study.objects.get(pk=study.pk).scale] == ["Good", "Fair", "Bad"]
    assert StudyAmendment.objects.get().new_value[1] == {"value": 2, "label": "Fair"}


def test_the_exclusion_rules_are_amended_as_switches_though_the_study_page_has_them_switched_off(
    staff_client,
):
    study = ready_study()
    frozen = _frozen(study)
    url, data = amend_form(staff_client, study, "exclusion_rules")
    assert "disabled" not in staff_client.get(url).content.decode().split('id="amendable"')[0]
    # Identical answers alone are no evidence on a three-point scale: the rules' own validator says so.
    straight = {"exclusion_rules_4": "on", "exclusion_rules_7": "on"}
    response = staff_client.post(url, {**data, **straight, "reason": "declared in the protocol"})
    assert response.status_code == 400 and "needs a scale of at least 5 points" in response.content.decode()
    assert _unchanged(study, frozen)
    fast = {"exclusion_rules_2": "on", "exclusion_rules_3": "1200"}
    response = staff_client.post(url, {**data, **fast, "reason": "declared in the protocol"})
    assert response.status_code == 302
    rules = Study.objects.get(pk=study.pk).exclusion_rules
    assert rules["too_fast"] == {"min_median_ms": 1200} and StudyAmendment.objects.get().new_value == rules


def test_the_planned_analysis_is_amended_with_its_notes_kept(staff_client):
    planned = {"tests": ["omnibus"], "alpha": 0.05, "correction": "holm", "note": "as registered on OSF"}
    study = ready_study(planned_analysis=planned)
    _frozen(study)
    url, data = amend_form(staff_client, study, "planned_analysis")
    response = staff_client.post(url, {**data, "planned_analysis_1": "0.01", "reason": "α typed wrong"})
    assert response.status_code == 302
    assert Study.objects.get(pk=study.pk).planned_analysis == {**planned, "alpha": 0.01}


def test_a_field_the_study_page_does_not_show_is_not_offered(staff_client):
    study = ready_study()
    _frozen(study)
    url = reverse("admin:studies_study_amend", args=[study.pk])
    response = staff_client.post(url + "?field=completion_code", {"completion_code": "X", "reason": "r"})
    assert response.status_code == 200 and "cannot be amended here" in response.content.decode()
    assert not StudyAmendment.objects.exists()


def test_a_draft_study_is_edited_freely_and_is_not_frozen(staff_client):
    study = ready_study()
    data = change_form_data(staff_client, study)
    data["quota_per_condition"] = "99"
    response = staff_client.post(reverse("admin:studies_study_change", args=[study.pk]), data)
    assert response.status_code == 302 and Study.objects.get(pk=study.pk).quota_per_condition == 99
    assert (
        not StudyDesign.objects.exists()
        and AttentionCheck.objects.count() == 1
        and Prompt.objects.count() == 4
    )


def test_saving_an_unfrozen_field_of_a_stale_instance_is_allowed():
    study = ready_study()
    _frozen(study)
    stale = Study.objects.get(pk=study.pk)
    study_amend(study=study, field="seed", value=42, reason="typo", author="ann")
    stale.title = "Renamed"
    stale.save(update_fields=["title"])  # not a frozen field: allowed, and the amendment stays
    assert Study.objects.get(pk=study.pk).seed == 42
    with pytest.raises(FrozenDesignError):
        stale.save()  # the stale seed would undo the amendment silently


def test_nothing_of_a_launched_design_is_deleted_on_its_own_but_the_whole_study_goes():
    study = ready_study()
    frozen = _frozen(study)
    prompt = study.prompts.get(dialogue_id="d0")
    with pytest.raises(FrozenDesignError, match="Deleting the prompt 'd0'"), transaction.atomic():
        prompt.delete()
    with pytest.raises(FrozenDesignError, match="Deleting the prompt"), transaction.atomic():
        Prompt.objects.filter(study=study).delete()
    with pytest.raises(FrozenDesignError, match="Deleting an attention check"), transaction.atomic():
        study.attention_checks.get().delete()
    assert study.prompts.count() == 4 and study.attention_checks.count() == 1
    assert Response.objects.filter(prompt__study=study).count() == 8
    assert design_sha256(design_build(study)) == frozen.sha256
    study.delete()  # the whole study (the admin lists everything it takes first)
    assert (
        not Study.objects.filter(pk=study.pk).exists()
        and not Prompt.objects.filter(study_id=study.pk).exists()
    )


def test_the_kind_settings_are_frozen_too():
    study = StudyFactory(kind=Study.Kind.QUESTIONNAIRE)
    settings = QuestionnaireSettings.objects.create(study=study, significance_level=0.01)
    before = design_sha256(design_build(study))
    settings.significance_level = 0.02
    settings.save()  # a draft: free, and the hash follows
    assert design_sha256(design_build(study)) != before
    frozen = design_freeze(study, reason="launch")
    settings.save()  # no-op
    settings.significance_level = 0.05
    with pytest.raises(FrozenDesignError, match="kind's settings"):
        settings.save()
    assert QuestionnaireSettings.objects.get(pk=settings.pk).significance_level == 0.02
    assert design_sha256(design_build(Study.objects.get(pk=study.pk))) == frozen.sha256


def test_the_admin_refuses_a_change_of_a_launched_studys_kind_settings(staff_client):
    study = StudyFactory(kind=Study.Kind.QUESTIONNAIRE)
    QuestionnaireSettings.objects.create(study=study, significance_level=0.01)
    design_freeze(study, reason="launch")
    data = change_form_data(staff_client, study)
    url = reverse("admin:studies_study_change", args=[study.pk])
    assert staff_client.post(url, data).status_code == 302  # an unchanged save passes
    key = next(k for k in data if k.endswith("-significance_level"))
    response = staff_client.post(url, {**data, key: "0.05"})
    assert response.status_code == 400 and "part of its frozen design" in response.content.decode()
    assert QuestionnaireSettings.objects.get(study=study).significance_level == 0.01
