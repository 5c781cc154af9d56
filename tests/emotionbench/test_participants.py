"""The questionnaire kind's participant pages, through HTTP and in a phone-sized browser."""

import re

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from studies.models import (
    Condition,
    Instrument,
    Participant,
    QuestionnaireRun,
    Situation,
    Study,
    StudySituation,
)
from tests.factories import questionnaire_study_create
from tests.screenshots import screenshot

from .conftest import panas_definition, situations_definition

STEP = re.compile(r'name="step" value="([a-z_]+)"')
ITEM = re.compile(r'name="(item-\d+)" value="1"')
CHECK = re.compile(r"choose “([^”]+)” in this row")


def _questionnaire_study(write_json, **overrides) -> Study:
    call_command("import_instruments", write_json("q.json", [panas_definition()]))
    call_command("import_situations", write_json("s.json", situations_definition()))
    options = dict(
        slug="feelings",
        title="How situations make you feel",
        kind=Study.Kind.QUESTIONNAIRE,
        instrument=Instrument.objects.get(name="PANAS"),
        state=Study.State.LIVE,
        platform=Study.Platform.PROLIFIC,
        consent_text="You will say how you feel, imagine a situation, and say how you feel again.",
        completion_code="EBDONE42",
        failed_checks_code="EBCHECK",
        quota_per_condition=50,
        seed=9,
    )
    options.update(overrides)
    study = questionnaire_study_create(**options)
    Condition.objects.create(study=study, name="human", kind=Condition.Kind.HUMAN, is_baseline=True)
    StudySituation.objects.bulk_create(
        [StudySituation(study=study, situation=s) for s in Situation.objects.filter(emotion="Anger")[:3]]
    )
    return study


def _step(client, study):
    page = client.get(f"/s/{study.slug}/step/").content.decode()
    match = STEP.search(page)
    return (match.group(1) if match else None), page


def _answer_instrument(client, study, page, *, value=3, check_right=True):
    anchors = ["very slightly or not at all", "a little", "moderately", "quite a bit", "extremely"]
    step = STEP.search(page).group(1)
    data = {"step": step, **{name: value for name in ITEM.findall(page)}}
    wanted = anchors.index(CHECK.search(page).group(1)) + 1
    data["check"] = wanted if check_right else (wanted % 5) + 1
    return client.post(f"/s/{study.slug}/step/", data)


@pytest.mark.django_db
def test_a_participant_answers_before_and_after_their_situation_exactly_once(client, write_json):
    study = _questionnaire_study(write_json, ask_demographics=True)
    client.get(f"/s/{study.slug}/", {"PROLIFIC_PID": "P1", "STUDY_ID": "S", "SESSION_ID": "X"})
    step, _ = _step(client, study)
    assert step == "consent"
    client.post(f"/s/{study.slug}/step/", {"step": "consent", "decision": "agree"})
    step, page = _step(client, study)
    assert step == "demographics"
    client.post(f"/s/{study.slug}/step/", {"step": "demographics", "year_of_birth": "1990", "country": "UK"})
    step, page = _step(client, study)
    assert step == "q_default" and "right now" in page
    assert len(ITEM.findall(page)) == 20
    # An incomplete page is refused and stores nothing.
    response = client.post(f"/s/{study.slug}/step/", {"step": "q_default", "item-1": 3})
    assert response.status_code == 400 and "still need" in response.content.decode()
    assert not QuestionnaireRun.objects.exists()
    _answer_instrument(client, study, page, value=2)
    # A re-post of the same page (back button, double click) is a no-op.
    _answer_instrument(client, study, page, value=5)
    participant = Participant.objects.get(external_id="P1")
    default = QuestionnaireRun.objects.get(participant=participant, phase="default")
    assert set(default.answers.values_list("value", flat=True)) == {2}
    assert sorted(default.item_order) == list(range(1, 21)) and default.item_order != list(range(1, 21))
    assert (
        list(default.answers.order_by("position").values_list("item_number", flat=True)) == default.item_order
    )

    step, page = _step(client, study)
    situation = participant.assignments.get(kind="situation").situation
    assert step == "q_situation" and situation.text in page
    client.post(f"/s/{study.slug}/step/", {"step": "q_situation"})
    step, page = _step(client, study)
    assert step == "q_evoked" and situation.text in page
    _answer_instrument(client, study, page, value=4)
    page = client.get(f"/s/{study.slug}/step/").content.decode()
    assert "EBDONE42" in page
    participant.refresh_from_db()
    assert participant.status == Participant.Status.COMPLETED and participant.completion_code == "EBDONE42"
    assert participant.demographics == {"year_of_birth": 1990, "country": "UK"}
    evoked = QuestionnaireRun.objects.get(participant=participant, phase="evoked")
    assert evoked.situation == situation and evoked.condition.name == "human"
    assert evoked.subject_key == default.subject_key  # paired in the analysis
    assert QuestionnaireRun.objects.count() == 2


@pytest.mark.django_db
def test_the_hidden_instruction_is_on_the_questionnaire_and_following_it_flags_the_participant(
    client, write_json
):
    from studies.authenticity import TRAP_FIELD, trap_word

    study = _questionnaire_study(write_json, trap_hidden_instruction=True)
    client.get(f"/s/{study.slug}/", {"PROLIFIC_PID": "P1", "STUDY_ID": "S", "SESSION_ID": "X"})
    client.post(f"/s/{study.slug}/step/", {"step": "consent", "decision": "agree"})
    step, page = _step(client, study)
    assert step == "q_default" and trap_word(study) in page and f'name="{TRAP_FIELD}"' in page
    anchors = ["very slightly or not at all", "a little", "moderately", "quite a bit", "extremely"]
    data = {"step": step, TRAP_FIELD: trap_word(study), **{name: 3 for name in ITEM.findall(page)}}
    data["check"] = anchors.index(CHECK.search(page).group(1)) + 1
    client.post(f"/s/{study.slug}/step/", data)
    participant = Participant.objects.get(external_id="P1")
    assert QuestionnaireRun.objects.filter(participant=participant, phase="default").exists()
    assert participant.authenticity.flagged and participant.authenticity.pages["q_default"] == {"trap": 1}


@pytest.mark.django_db
def test_a_failed_attention_check_flags_the_participant_and_gives_the_failed_checks_code(client, write_json):
    study = _questionnaire_study(write_json, randomise_item_order=False)
    client.get(f"/s/{study.slug}/", {"PROLIFIC_PID": "P2", "STUDY_ID": "S", "SESSION_ID": "X"})
    client.post(f"/s/{study.slug}/step/", {"step": "consent", "decision": "agree"})
    _, page = _step(client, study)
    _answer_instrument(client, study, page, check_right=False)
    run = QuestionnaireRun.objects.get(phase="default")
    assert run.item_order == list(range(1, 21))
    client.post(f"/s/{study.slug}/step/", {"step": "q_situation"})
    _, page = _step(client, study)
    _answer_instrument(client, study, page)
    participant = Participant.objects.get(external_id="P2")
    assert participant.flagged_for_exclusion and participant.attention_failures == 1
    assert participant.completion_code == "EBCHECK"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_participant_completes_panas_situation_panas_on_a_phone(live_server, phone_page, write_json):
    study = _questionnaire_study(write_json)
    page = phone_page
    page.goto(f"{live_server.url}/s/{study.slug}/?PROLIFIC_PID=PHONE1&STUDY_ID=S1&SESSION_ID=X1")
    page.get_by_role("button", name="I agree, start the study").tap()

    def fill_instrument(choice: int):
        check = page.locator("fieldset", has_text="To show you are reading")
        wanted = CHECK.search(check.inner_text()).group(1)
        check.get_by_label(wanted, exact=True).check()
        for fieldset in page.locator("fieldset.q-item").all():
            if "To show you are reading" in fieldset.inner_text():
                continue
            fieldset.locator("label.likert-option").nth(choice).tap()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        page.get_by_role("button", name="Continue").tap()

    expect(page.locator("fieldset.q-item")).to_have_count(21)
    screenshot(page, "panas-phone", full_page=False)
    fill_instrument(1)
    expect(page.locator("h1")).to_have_text("Imagine this situation")
    screenshot(page, "situation-phone", full_page=False)
    page.get_by_role("button", name="I have imagined it, continue").tap()
    expect(page.locator("h1")).to_contain_text("Imagining the situation")
    fill_instrument(3)
    expect(page.locator("[data-completion-code]")).to_have_text("EBDONE42")
    participant = Participant.objects.get(external_id="PHONE1")
    assert participant.status == Participant.Status.COMPLETED and not participant.flagged_for_exclusion
    assert QuestionnaireRun.objects.filter(participant=participant).count() == 2


@pytest.mark.django_db(transaction=True)
def test_two_simultaneous_posts_of_the_same_page_store_one_run(write_json, requires_postgres):
    import threading

    from django.db import connection

    from kinds.questionnaire.pages import questionnaire_submit
    from studies.participants import participant_enroll

    study = _questionnaire_study(write_json)
    participant = participant_enroll(study=study, external_id="RACER")
    Participant.objects.filter(pk=participant.pk).update(step="q_default")
    barrier = threading.Barrier(4)
    results = []

    def post(value):
        try:
            me = Participant.objects.get(pk=participant.pk)
            barrier.wait()
            results.append(
                questionnaire_submit(
                    participant=me,
                    step="q_default",
                    answers=dict.fromkeys(range(1, 21), value),
                    check_passed=True,
                )
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=(v,)) for v in (1, 2, 3, 4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False, False, False, True]
    run = QuestionnaireRun.objects.get(participant=participant)
    assert run.answers.count() == 20 and len(set(run.answers.values_list("value", flat=True))) == 1
    assert Participant.objects.get(pk=participant.pk).step == "q_situation"
