"""The admin through the test client as a staff user: changelists without N+1, the study actions, the import
page and the live status page."""

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from kinds.rating.models import Rating
from studies.balance_counts import counts_rebuild
from studies.models import Assignment, Emotion, Participant, Study
from tests.factories import ConditionFactory, ParticipantFactory, PromptFactory, ResponseFactory, StudyFactory

from .helpers import public_csv, public_rows, row_counts

pytestmark = pytest.mark.django_db


def build_study(slug: str, *, prompts: int = 6, participants: int = 4, state=Study.State.DRAFT) -> Study:
    study = StudyFactory(slug=slug, state=state, items_per_participant=2)
    human = ConditionFactory(study=study, name="human", is_baseline=True)
    gpt = ConditionFactory(study=study, name="gpt4", kind="llm", position=1)
    responses = []
    for _ in range(prompts):
        prompt = PromptFactory(study=study)
        responses.append(ResponseFactory(prompt=prompt, condition=human))
        ResponseFactory(prompt=prompt, condition=gpt)
    for i in range(participants):
        p = ParticipantFactory(study=study, condition=human, status=Participant.Status.COMPLETED)
        a = Assignment.objects.create(participant=p, position=0, response=responses[i % prompts])
        Rating.objects.create(assignment=a, value=3)
    counts_rebuild(study)  # rows written here, not by enrolment: the running totals counted from them
    return study


@pytest.mark.parametrize("model", ["study", "emotion", "prompt", "response", "participant"])
def test_changelists_render_with_a_fixed_number_of_queries(
    staff_client, django_assert_max_num_queries, model
):
    build_study("one")
    url = reverse(f"admin:studies_{model}_changelist")
    staff_client.get(url)  # the first page after signing in records the sign-in time in the session
    with django_assert_max_num_queries(15) as small:
        assert staff_client.get(url).status_code == 200
    for i in range(3):
        build_study(f"more{i}", prompts=10, participants=8)
    with django_assert_max_num_queries(len(small.captured_queries)) as large:
        response = staff_client.get(url)
    assert response.status_code == 200
    assert len(large.captured_queries) == len(small.captured_queries)


def test_the_study_changelist_shows_state_and_counts(staff_client):
    build_study("counted", prompts=5, participants=3, state=Study.State.LIVE)
    page = staff_client.get(reverse("admin:studies_study_changelist")).content.decode()
    assert "counted" in page and "Live" in page
    assert '<td class="field-n_prompts">5</td>' in page
    assert '<td class="field-n_participants">3</td>' in page
    assert "Import corpus" in page


def test_the_change_page_offers_status_import_and_a_preview_link(staff_client):
    study = build_study("seen")
    page = staff_client.get(reverse("admin:studies_study_change", args=[study.pk])).content.decode()
    assert "/s/seen/?preview=1" in page
    assert reverse("admin:studies_study_status", args=[study.pk]) in page
    assert "Import corpus" in page
    assert 'name="conditions-0-name"' in page  # the conditions inline
    assert 'name="attention_checks-TOTAL_FORMS"' in page


def test_the_status_page_refreshes_and_shows_the_counts(staff_client, django_assert_max_num_queries):
    study = build_study("watched", prompts=6, participants=4, state=Study.State.LIVE)
    ParticipantFactory(
        study=study, condition=study.conditions.get(name="gpt4"), status=Participant.Status.RETURNED
    )
    # The first look computes the declared-rule flags of the participants new to the page (studies/declared_flags.py:
    # a few queries more per 2,000 of them); a later look, nobody having changed, reads the stored flags.
    with django_assert_max_num_queries(25):
        staff_client.get(reverse("admin:studies_study_status", args=[study.pk]))
    with django_assert_max_num_queries(15):
        response = staff_client.get(reverse("admin:studies_study_status", args=[study.pk]))
    page = response.content.decode()
    assert response.status_code == 200
    # No <meta refresh> (axe: critical): the figures are replaced in place by a static script, which a
    # button pauses; without JavaScript there is a "Refresh now" link.
    assert 'http-equiv="refresh"' not in page
    assert 'data-refresh-seconds="10"' in page and "/static/studies/status.js" in page
    assert "Refresh now" in page and "data-refresh-toggle" in page
    assert "human (baseline)" in page
    assert "2 responses" in page and "4 responses" in page  # human: 4 rated once, 2 not rated
    assert "6 responses" in page  # gpt4: none rated
    assert "/s/watched/?preview=1" in page


def test_the_status_page_needs_staff(client):
    study = build_study("private")
    response = client.get(reverse("admin:studies_study_status", args=[study.pk]))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def upload(staff_client, data: bytes, **fields):
    return staff_client.post(
        reverse("admin:studies_study_import"),
        {"file": SimpleUploadedFile("corpus.csv", data, content_type="text/csv"), "seed": "0", **fields},
    )


def test_the_import_page_imports_a_file_into_a_new_draft(staff_client):
    assert staff_client.get(reverse("admin:studies_study_import") + "?study=x").status_code == 200
    response = upload(staff_client, public_csv(public_rows(8)), study_slug="uploaded", sample="4")
    study = Study.objects.get(slug="uploaded")
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:studies_study_change", args=[study.pk])
    assert study.state == "draft" and study.prompts.count() == 4
    page = staff_client.get(response["Location"]).content.decode()
    assert "Imported 4 prompts and 8 responses" in page


def test_the_import_page_lists_every_problem_and_writes_nothing(staff_client):
    rows = public_rows(4)
    rows[1][1] = "happyish"
    rows[2][5] = ""
    before = row_counts()
    response = upload(staff_client, public_csv(rows), study_slug="refused")
    page = response.content.decode()
    assert response.status_code == 400
    assert "Nothing was imported." in page
    assert "row 3, column &#x27;emotion&#x27;: unknown emotion &#x27;happyish&#x27;" in page
    assert "row 4, column &#x27;response_human&#x27;: empty text" in page
    assert row_counts() == before


def test_the_import_page_refuses_a_live_study(staff_client):
    build_study("running", state=Study.State.LIVE)
    response = upload(staff_client, public_csv(public_rows(3)), study_slug="running")
    assert response.status_code == 400
    assert "is live: a corpus can only be imported into a draft" in response.content.decode()


def act(staff_client, action: str, *studies):
    return staff_client.post(
        reverse("admin:studies_study_changelist"),
        {"action": action, "_selected_action": [s.pk for s in studies]},
        follow=True,
    )


def test_admin_actions_launch_pause_resume_and_close_through_the_services(staff_client):
    ready = build_study("ready")
    page = act(staff_client, "launch_selected", ready).content.decode()
    assert "“ready” is now live." in page
    act(staff_client, "pause_selected", ready)
    assert Study.objects.get(pk=ready.pk).state == "paused"
    act(staff_client, "resume_selected", ready)
    assert Study.objects.get(pk=ready.pk).state == "live"
    act(staff_client, "close_selected", ready)
    assert Study.objects.get(pk=ready.pk).state == "closed"


def test_a_refused_launch_shows_why(staff_client):
    empty = StudyFactory(slug="empty", completion_code="", consent_text="", instructions_text="")
    page = act(staff_client, "launch_selected", empty).content.decode()
    assert "Cannot launch “empty”" in page
    # Every missing piece at once, not one a launch attempt.
    assert "the study has no conditions" in page
    assert "the consent text is empty" in page
    assert "the instructions are empty" in page
    assert "the completion code is not set" in page
    page = act(staff_client, "pause_selected", empty).content.decode()
    assert "annot pause study &#x27;empty&#x27;: it is draft, not live" in page
    assert Study.objects.get(pk=empty.pk).state == "draft"


def test_valence_is_editable_in_the_emotion_list(staff_client):
    emotions = list(Emotion.objects.order_by("name"))
    data = {"form-TOTAL_FORMS": str(len(emotions)), "form-INITIAL_FORMS": str(len(emotions)), "_save": "Save"}
    for i, emotion in enumerate(emotions):
        data[f"form-{i}-id"] = str(emotion.pk)
        data[f"form-{i}-valence"] = "neutral" if emotion.name == "nostalgic" else emotion.valence
    response = staff_client.post(reverse("admin:studies_emotion_changelist") + "?all=", data)
    assert response.status_code == 302
    assert Emotion.objects.get(name="nostalgic").valence == "neutral"
    assert Emotion.objects.get(name="sad").valence == "negative"


def test_participant_pages_show_external_ids_and_answers_to_staff(staff_client):
    study = build_study("people", participants=2)
    participant = Participant.objects.filter(study=study).first()
    page = staff_client.get(
        reverse("admin:studies_participant_change", args=[participant.pk])
    ).content.decode()
    assert participant.external_id in page
    listing = staff_client.get(
        reverse("admin:studies_participant_changelist") + "?q=" + participant.external_id
    )
    assert participant.external_id in listing.content.decode()


def test_a_participants_exclusion_reasons_are_edited_one_a_line_and_a_responses_flags_are_a_record(
    staff_client,
):
    study = build_study("reasons", participants=1)
    participant = Participant.objects.get(study=study)
    participant.exclusion_reasons = ["failed 2 attention checks", "too fast"]
    participant.save(update_fields=["exclusion_reasons"])
    url = reverse("admin:studies_participant_change", args=[participant.pk])
    page = staff_client.get(url).content.decode()
    assert "failed 2 attention checks\ntoo fast</textarea>" in page and '["failed' not in page
    hidden = dict(re.findall(r'<input type="hidden" name="([\w-]+)" value="([^"]*)"', page))
    assert "assignments-TOTAL_FORMS" in hidden  # the answers' inline, posted back as the page would
    posted = staff_client.post(
        url, {"flagged_for_exclusion": "on", "exclusion_reasons": "too fast\r\n\r\n duplicate ", **hidden}
    )
    assert posted.status_code == 302
    participant.refresh_from_db()
    assert participant.flagged_for_exclusion and participant.exclusion_reasons == ["too fast", "duplicate"]
    response = participant.assignments.get().response
    response.review_flags = ["refusal"]
    response.save(update_fields=["review_flags"])
    page = staff_client.get(reverse("admin:studies_response_change", args=[response.pk])).content.decode()
    assert "refusal" in page and 'name="review_flags"' not in page


def test_questionnaire_pages_render_without_a_query_per_row(staff_client, django_assert_max_num_queries):
    from studies.models import Instrument, InstrumentItem, StudySituation
    from tests.factories import SituationFactory

    def add(n):
        for _ in range(n):
            instrument = Instrument.objects.create(name=f"PANAS-{Instrument.objects.count()}")
            InstrumentItem.objects.create(instrument=instrument, number=1, text="Interested")
            SituationFactory()

    add(2)
    study = StudyFactory(slug="feelings", kind=Study.Kind.QUESTIONNAIRE)
    StudySituation.objects.create(study=study, situation=SituationFactory())
    counts = {}
    for name in ("instrument", "situation"):
        with django_assert_max_num_queries(15) as captured:
            assert staff_client.get(reverse(f"admin:studies_{name}_changelist")).status_code == 200
        counts[name] = len(captured.captured_queries)
    add(6)
    for name in ("instrument", "situation"):
        with django_assert_max_num_queries(counts[name]):
            assert staff_client.get(reverse(f"admin:studies_{name}_changelist")).status_code == 200
    page = staff_client.get(reverse("admin:studies_study_change", args=[study.pk])).content.decode()
    assert 'name="study_situations-TOTAL_FORMS"' in page
    assert "Anger-1 #" in page  # the chosen situation


def test_the_import_page_can_check_a_file_without_importing_it(staff_client):
    before = row_counts()
    response = upload(
        staff_client, public_csv(public_rows(5)), study_slug="checked", dry_run="on", sample="3", seed="7"
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "Dry run, nothing written" in page and "Check passed" in page
    # The form keeps what was filled in, with "Check only" unticked for the real import.
    assert 'name="study_slug" value="checked"' in page
    assert 'name="sample" value="3"' in page and 'name="seed" value="7"' in page
    assert 'name="dry_run" id="id_dry_run" checked' not in page and 'name="dry_run"' in page
    assert row_counts() == before


def test_the_change_page_links_to_launch_analysis_generation_and_shows_the_participant_link(staff_client):
    study = build_study("linked")
    page = staff_client.get(reverse("admin:studies_study_change", args=[study.pk])).content.decode()
    assert reverse("admin:studies_study_state", args=[study.pk, "launch"]) in page  # Launch, as a button
    assert reverse("analysis:dashboard", args=["linked"]) in page
    assert reverse("admin:generation_study", args=[study.pk]) in page  # it has an LLM condition
    assert (
        "http://testserver/s/linked/?PROLIFIC_PID={{%PROLIFIC_PID%}}&amp;STUDY_ID={{%STUDY_ID%}}"
        "&amp;SESSION_ID={{%SESSION_ID%}}" in page
    )
    assert "style=" not in page.split('id="content"', 1)[1].split("<form", 1)[0]


def test_the_generation_entry_point_is_where_the_docs_say(staff_client):
    page = staff_client.get(reverse("admin:generation_generationjob_changelist")).content.decode()
    assert reverse("admin:generation_studies") in page and "Generate LLM responses" in page
    page = staff_client.get(reverse("admin:studies_study_changelist")).content.decode()
    assert reverse("admin:generation_studies") in page


def test_launch_from_the_change_page_says_what_it_does_then_launches(staff_client):
    study = build_study("buttoned")
    url = reverse("admin:studies_study_state", args=[study.pk, "launch"])
    page = staff_client.get(url).content.decode()
    assert "Launching makes it live" in page and 'value="Launch"' in page
    assert Study.objects.get(pk=study.pk).state == "draft"  # a GET changes nothing
    page = staff_client.post(url, follow=True).content.decode()
    assert "“buttoned” is now live." in page
    assert Study.objects.get(pk=study.pk).state == "live"
    # Only the changes open to a live study are offered.
    page = staff_client.get(reverse("admin:studies_study_change", args=[study.pk])).content.decode()
    assert reverse("admin:studies_study_state", args=[study.pk, "close"]) in page
    assert reverse("admin:studies_study_state", args=[study.pk, "launch"]) not in page


def test_a_launch_that_cannot_happen_lists_why_and_offers_no_button(staff_client):
    empty = StudyFactory(slug="unready", completion_code="")
    page = staff_client.get(reverse("admin:studies_study_state", args=[empty.pk, "launch"])).content.decode()
    assert "the completion code is not set" in page and 'value="Launch"' not in page


def test_closing_a_study_with_participants_taking_part_asks_first(staff_client):
    study = build_study("busy", state=Study.State.LIVE)
    ParticipantFactory(study=study, condition=study.conditions.get(name="human"), status="active")
    ParticipantFactory(
        study=study, condition=study.conditions.get(name="human"), status="active", is_preview=True
    )
    page = act(staff_client, "close_selected", study).content.decode()
    assert "“busy”: 1 participant right now" in page and 'name="confirm" value="yes"' in page
    assert Study.objects.get(pk=study.pk).state == "live"
    response = staff_client.post(
        reverse("admin:studies_study_changelist"),
        {"action": "close_selected", "_selected_action": [study.pk], "confirm": "yes"},
        follow=True,
    )
    assert "“busy” is now closed." in response.content.decode()
    assert Study.objects.get(pk=study.pk).state == "closed"


def test_the_close_button_names_the_participants_taking_part(staff_client):
    study = build_study("watched-close", state=Study.State.LIVE)
    ParticipantFactory(study=study, condition=study.conditions.get(name="human"), status="active")
    url = reverse("admin:studies_study_state", args=[study.pk, "close"])
    page = staff_client.get(url).content.decode()
    assert "1 participant is taking part right now" in page and 'value="Close for good anyway"' in page
    staff_client.post(url)
    assert Study.objects.get(pk=study.pk).state == "closed"


def test_deleting_a_condition_with_ratings_is_refused_in_one_sentence(staff_client):
    study = build_study("kept", participants=4)
    human = study.conditions.get(name="human")
    page = staff_client.get(reverse("admin:studies_study_change", args=[study.pk])).content.decode()
    data = change_form_data(page)
    index = next(
        k.split("-")[1]
        for k, v in data.items()
        if k.endswith("-id") and v == str(human.pk) and k.startswith("conditions-")
    )
    data[f"conditions-{index}-DELETE"] = "on"
    response = staff_client.post(reverse("admin:studies_study_change", args=[study.pk]), data)
    text = response.content.decode()
    assert response.status_code == 400
    assert "cannot be deleted" in text and "4 participants" in text and "untick “enrolling” instead" in text
    assert "Assignment object" not in text and "would require deleting the following" not in text
    assert study.conditions.filter(pk=human.pk).exists()


def change_form_data(page: str) -> dict[str, str]:
    """The values a browser would send from the admin change form (inputs, selects, textareas)."""
    from html.parser import HTMLParser

    class Form(HTMLParser):
        def __init__(self):
            super().__init__()
            self.data, self.textarea, self.select = {}, None, None

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            name = a.get("name")
            if tag == "input" and name and a.get("type") not in {"submit", "button", "file"}:
                if a.get("type") in {"checkbox", "radio"}:
                    if "checked" in a:
                        self.data[name] = a.get("value", "on")
                else:
                    self.data[name] = a.get("value", "")
            elif tag == "textarea" and name:
                self.textarea = name
                self.data[name] = ""
            elif tag == "select" and name:
                self.select = name
                self.data.setdefault(name, "")
            elif tag == "option" and self.select and "selected" in a:
                self.data[self.select] = a.get("value", "")

        def handle_endtag(self, tag):
            if tag == "textarea":
                # A browser drops the newline that follows <textarea> (Django's template writes one).
                self.data[self.textarea] = self.data[self.textarea].removeprefix("\n")
                self.textarea = None
            elif tag == "select":
                self.select = None

        def handle_data(self, data):
            if self.textarea:
                self.data[self.textarea] += data

    form = Form()
    form.feed(page)
    form.data.pop("csrfmiddlewaretoken", None)
    return {k: v for k, v in form.data.items() if k not in {"action", "_selected_action"}}


def test_a_researcher_confirms_or_clears_authenticity_flags_and_the_status_page_counts_them(
    staff_client, staff_user, django_assert_max_num_queries
):
    from studies.models import ParticipantAuthenticity

    study = build_study("reviewed", prompts=4, participants=3, state=Study.State.LIVE)
    rows = [
        ParticipantAuthenticity.objects.create(
            participant=p,
            score=10,
            flagged=True,
            excluded=True,
            reasons=["scripted clicks: 3 of 3 pages (-60)"],
        )
        for p in study.participants.order_by("id")
    ]
    url = reverse("admin:studies_participantauthenticity_changelist")
    staff_client.get(url)  # the first page after signing in records the sign-in time in the session
    with django_assert_max_num_queries(15):
        page = staff_client.get(url).content.decode()
    assert page.count("reviewed") >= 3 and "Not reviewed" in page
    staff_client.post(url, {"action": "clear_flag", "_selected_action": [rows[0].pk]})
    staff_client.post(url, {"action": "confirm_flag", "_selected_action": [rows[1].pk]})
    cleared, confirmed, open_ = (ParticipantAuthenticity.objects.get(pk=r.pk) for r in rows)
    assert (cleared.review, cleared.excluded, cleared.reviewed_by) == ("cleared", False, staff_user)
    assert (confirmed.review, confirmed.excluded) == ("confirmed", True) and confirmed.reviewed_at is not None
    assert (open_.review, open_.excluded) == ("open", True)
    assert all(Participant.objects.get(pk=r.pk).status == Participant.Status.COMPLETED for r in rows)
    status = staff_client.get(reverse("admin:studies_study_status", args=[study.pk])).content.decode()
    assert "Authenticity flags" in status
