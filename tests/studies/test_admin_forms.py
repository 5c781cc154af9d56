"""The study's JSON settings edited as forms in the admin: the scale, worked examples, exclusion rules, planned
analysis and attention checks by label. The browser posts inputs, never JSON; the stored JSON is the same shape
the rest of the platform reads, and every refusal is the one validator's message on the field."""

import pytest
from django.urls import reverse

from studies.models import AttentionCheck, Study
from tests.factories import StudyFactory

from .test_admin import change_form_data

pytestmark = pytest.mark.django_db


def page_of(client, study: Study) -> str:
    response = client.get(reverse("admin:studies_study_change", args=[study.pk]))
    assert response.status_code == 200
    return response.content.decode()


def post(client, study: Study, data: dict):
    return client.post(reverse("admin:studies_study_change", args=[study.pk]), data)


def test_no_setting_is_a_json_box(staff_client):
    study = StudyFactory()
    page = page_of(staff_client, study)
    for name in ("scale", "worked_examples", "exclusion_rules", "planned_analysis"):
        assert f'name="{name}"' not in page, name  # one JSON textarea each, before
        assert f'name="{name}_0"' in page, name
    assert "Expected answer" not in page or "<select" in page
    assert '<label for="id_scale_1">' in page or 'for="id_scale_1"' in page  # every input has a label


def test_the_scale_is_edited_as_labelled_rows(staff_client):
    study = StudyFactory()
    data = change_form_data(page_of(staff_client, study))
    assert (data["scale_0"], data["scale_1"], data["scale_4"], data["scale_5"]) == ("3", "Good", "1", "Bad")
    assert "scale_9" in data and "scale_10" not in data  # three options and two blank ones
    data.update(scale_0="5", scale_1="Very good", scale_2="4", scale_3="Good", scale_4="3", scale_5="Okay")
    data.update(scale_6="2", scale_7="Poor", scale_8="1", scale_9="Bad")
    assert post(staff_client, study, data).status_code == 302
    study.refresh_from_db()
    assert [o["label"] for o in study.scale] == ["Very good", "Good", "Okay", "Poor", "Bad"]
    assert [o["value"] for o in study.scale] == [5, 4, 3, 2, 1]
    assert "scale_13" in change_form_data(page_of(staff_client, study))  # room for two more


def test_a_bad_scale_is_refused_with_every_problem_and_nothing_is_written(staff_client):
    study = StudyFactory()
    data = change_form_data(page_of(staff_client, study))
    data.update(scale_2="3", scale_3="", title="A new title")  # a repeated value, and a value with no label
    response = post(staff_client, study, data)
    text = response.content.decode()
    assert response.status_code == 400
    assert "each value may be used once (repeated: 3)" in text and "option 2 (value 3) has no label" in text
    study.refresh_from_db()
    assert study.title != "A new title" and [o["value"] for o in study.scale] == [3, 2, 1]


def test_worked_examples_are_rated_by_a_label_of_the_scale(staff_client):
    study = StudyFactory(worked_examples=[])
    page = page_of(staff_client, study)
    assert '<option value="2">Okay</option>' in page
    data = change_form_data(page)
    data.update(
        worked_examples_0="sad",
        worked_examples_1="My dog died.",
        worked_examples_2="I miss him.",
        worked_examples_3="I'm so sorry; he was family.",
        worked_examples_4="3",
        worked_examples_5="It names the loss.",
    )
    assert post(staff_client, study, data).status_code == 302
    study.refresh_from_db()
    assert study.worked_examples == [
        {
            "emotion": "sad",
            "situation": "My dog died.",
            "speaker_utterance": "I miss him.",
            "response": "I'm so sorry; he was family.",
            "rating": 3,
            "explanation": "It names the loss.",
        }
    ]
    # The saved example is shown again, with a spare blank one to add; blanking its texts removes it.
    data = change_form_data(page_of(staff_client, study))
    assert data["worked_examples_1"] == "My dog died." and "worked_examples_11" in data
    data.update(worked_examples_1="", worked_examples_2="")
    response = post(staff_client, study, data)
    assert response.status_code == 400 and "example 1: the situation is empty" in response.content.decode()
    for i in range(6):
        data[f"worked_examples_{i}"] = ""
    assert post(staff_client, study, data).status_code == 302
    study.refresh_from_db()
    assert study.worked_examples == []


def test_exclusion_rules_are_switches_and_thresholds(staff_client):
    study = StudyFactory()
    data = change_form_data(page_of(staff_client, study))
    assert data.get("exclusion_rules_0") == "on" and "exclusion_rules_2" not in data
    data.update(
        exclusion_rules_2="on", exclusion_rules_3="2000", exclusion_rules_4="on", exclusion_rules_7="on"
    )
    data.pop("exclusion_rules_1", None)
    response = post(staff_client, study, data)  # identical answers alone on a three-point scale: refused
    assert response.status_code == 400
    assert "at least 5 points (this one has 3)" in response.content.decode()
    data.pop("exclusion_rules_7")
    assert post(staff_client, study, data).status_code == 302
    study.refresh_from_db()
    assert study.exclusion_rules == {
        "attention_checks": True,
        "incomplete": False,
        "too_fast": {"min_median_ms": 2000},
        "straight_lining": {"min_items": 10, "corroborating_median_ms": 3000, "identical_alone": False},
        "authenticity": False,
    }


def test_the_planned_analysis_is_tests_alpha_and_a_correction_and_keeps_its_notes(staff_client):
    study = StudyFactory(
        planned_analysis={"tests": ["omnibus"], "alpha": 0.05, "correction": "holm", "note": "x"}
    )
    data = change_form_data(page_of(staff_client, study))
    assert data["planned_analysis_0"] == "omnibus" and data["planned_analysis_2"] == "holm"
    data.update(planned_analysis_0="omnibus\n\n2x2 vs human\n", planned_analysis_1="0.01")
    data["planned_analysis_2"] = "fdr_bh"
    assert post(staff_client, study, data).status_code == 302
    study.refresh_from_db()
    assert study.planned_analysis == {
        "tests": ["omnibus", "2x2 vs human"],
        "alpha": 0.01,
        "correction": "fdr_bh",
        "note": "x",
    }
    data["planned_analysis_1"] = "1.5"
    response = post(staff_client, study, data)
    assert response.status_code == 400 and "between 0 and 1" in response.content.decode()


def test_an_attention_checks_expected_answer_is_chosen_by_its_label(staff_client):
    study = StudyFactory()
    AttentionCheck.objects.create(
        study=study, situation="s", speaker_utterance="u", response_text="choose Okay", expected_value=2,
        after_item=1,
    )  # fmt: skip
    page = page_of(staff_client, study)
    assert '<option value="2" selected>Okay</option>' in page
    data = change_form_data(page)
    data["attention_checks-0-expected_value"] = "1"
    assert post(staff_client, study, data).status_code == 302
    assert AttentionCheck.objects.get(study=study).expected_value == 1
    data["attention_checks-0-expected_value"] = "7"  # not on the scale
    response = post(staff_client, study, data)
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()


def test_a_launched_study_saved_unchanged_from_a_browser_is_no_edit_of_its_examples(staff_client):
    from studies.design import design_freeze

    example = {
        "emotion": "sad",
        "situation": "My dog died.\nLast week.",
        "speaker_utterance": "I miss him.",
        "response": "I'm so sorry.\nHe was family.",
        "rating": 3,
        "explanation": "It names the loss.",
    }
    study = StudyFactory(worked_examples=[example], state=Study.State.LIVE)
    design_freeze(study, reason="launch")
    data = change_form_data(page_of(staff_client, study))
    # A browser sends every textarea's line ends as CRLF.
    data = {k: v.replace("\n", "\r\n") if isinstance(v, str) else v for k, v in data.items()}
    response = post(staff_client, study, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    study.refresh_from_db()
    assert study.worked_examples == [example]
