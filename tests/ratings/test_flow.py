"""The participant flow through HTTP: entry, consent, instructions, TEQ, items, outcomes."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from kinds.rating.models import Rating, RatingSettings
from ratings.tasks import release_stale_participants
from studies.models import Assignment, Emotion, Participant, Study
from tests.factories import AttentionCheckFactory, rating_study_build
from tests.ratings.helpers import (
    answer_current,
    consent_and_instructions,
    current_position,
    current_step,
    enter,
    post_step,
    step_url,
)

pytestmark = pytest.mark.django_db

PROLIFIC_DONE = "https://app.prolific.com/submissions/complete?cc={code}"


@pytest.fixture
def study():
    return rating_study_build(
        conditions=2, prompts=8, items_per_participant=3, completion_redirect_url=PROLIFIC_DONE
    )


def finish(client, study, value=3):
    for _ in range(50):
        position, response = answer_current(client, study, value)
        if position is None:
            return
        assert response.status_code == 302


def test_declining_consent_ends_with_the_screen_out_code(client, study):
    enter(client, study, "PID1")
    response = post_step(client, study, decision="decline")
    assert response.status_code == 302
    page = client.get(step_url(study)).content.decode()
    assert "SCREENED" in page and "cc=SCREENED" in page
    participant = Participant.objects.get(external_id="PID1")
    assert participant.status == Participant.Status.SCREENED_OUT
    assert not participant.assignments.exists()  # the items went back


def test_a_participant_runs_through_to_the_completion_code_and_the_prolific_redirect(client, study):
    response = enter(client, study, "PID1")
    assert "Information and consent" in response.content.decode()
    participant = Participant.objects.get(external_id="PID1")
    assert (participant.platform, participant.platform_study_id, participant.platform_session_id) == (
        "prolific",
        "STUDY1",
        "SESSION1",
    )
    consent_and_instructions(client, study)
    page = client.get(step_url(study)).content.decode()
    assert "Item 1 of 3" in page and escape(RatingSettings().scale_question) in page and "Good" in page
    finish(client, study, value=2)
    page = client.get(step_url(study)).content.decode()
    assert "C0MPLETE" in page
    assert 'href="https://app.prolific.com/submissions/complete?cc=C0MPLETE"' in page
    participant.refresh_from_db()
    assert participant.status == Participant.Status.COMPLETED and participant.finished_at
    assert participant.completion_code == "C0MPLETE"
    ratings = Rating.objects.filter(assignment__participant=participant)
    assert sorted(r.value for r in ratings) == [2, 2, 2]
    assert all(r.response_time_ms is not None for r in ratings)


def test_the_item_page_shows_emotion_situation_both_speakers_and_progress(client, study):
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    page = client.get(step_url(study)).content.decode()
    first = Participant.objects.get().assignments.order_by("position").first().response
    for text in (
        first.prompt.emotion.name,
        first.prompt.situation,
        first.prompt.speaker_utterance,
        first.text,
    ):
        assert escape(text) in page
    assert "Item 1 of 3" in page
    answer_current(client, study, 3)
    assert "Item 2 of 3" in client.get(step_url(study)).content.decode()


def shown_emotion(page: str) -> str:
    return re.search(r'<dd class="emotion"[^>]*>([^<]*)</dd>', page).group(1)


def test_an_attention_check_page_shows_the_check_in_place_of_a_conversation(client, study):
    check = AttentionCheckFactory(study=study, after_item=1, emotion_label="careful <reader>")
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    answer_current(client, study, 1)
    page = client.get(step_url(study)).content.decode()
    for text in (check.situation, check.speaker_utterance, check.response_text):
        assert escape(text) in page
    # Its label is not one of the study's emotions: a real one is shown instead, so it does not stand out.
    study_emotions = set(Emotion.objects.filter(prompts__study=study).values_list("name", flat=True))
    assert shown_emotion(page) in study_emotions and "careful &lt;reader&gt;" not in page
    assert "Item 2 of 4" in page  # three responses and the check
    assert 'name="position" value="1"' in page
    shown = Participant.objects.get().assignments.get(kind=Assignment.Kind.ATTENTION).shown_at
    assert shown is not None
    client.get(step_url(study))  # a reload keeps the first time it was shown
    assert Participant.objects.get().assignments.get(kind=Assignment.Kind.ATTENTION).shown_at == shown


def test_an_attention_check_labelled_attention_check_shows_the_same_real_emotion_on_every_showing(
    client, study
):
    AttentionCheckFactory(study=study, after_item=0, emotion_label="Attention Check", expected_value=2)
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    first = client.get(step_url(study)).content.decode()
    assert shown_emotion(first) in set(
        Emotion.objects.filter(prompts__study=study).values_list("name", flat=True)
    )
    assert shown_emotion(client.get(step_url(study)).content.decode()) == shown_emotion(first)
    answer_current(client, study, 2)  # the expected value is unchanged: the check is passed
    finish(client, study)
    assert not Participant.objects.get().flagged_for_exclusion


def test_an_attention_check_with_a_real_emotion_label_keeps_it(client, study):
    emotion = Emotion.objects.filter(prompts__study=study).first()
    AttentionCheckFactory(study=study, after_item=0, emotion_label=emotion.name)
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    assert shown_emotion(client.get(step_url(study)).content.decode()) == emotion.name


@pytest.mark.parametrize(
    ("answer", "flagged", "code"), [(2, False, "C0MPLETE"), (1, True, "FAILEDCK")], ids=["passed", "failed"]
)
def test_attention_checks_decide_the_flag_and_the_completion_code(client, study, answer, flagged, code):
    AttentionCheckFactory(study=study, after_item=1, expected_value=2)
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    participant = Participant.objects.get()
    check = participant.assignments.get(kind=Assignment.Kind.ATTENTION)
    for _ in range(4):
        position = current_position(client, study)
        value = answer if position == check.position else 3
        client.post(step_url(study), {"step": "items", "position": position, "value": value})
    participant.refresh_from_db()
    assert participant.status == Participant.Status.COMPLETED
    assert participant.flagged_for_exclusion is flagged
    assert participant.attention_failures == (1 if flagged else 0)
    assert participant.completion_code == code
    assert bool(participant.exclusion_reasons) is flagged
    assert code in client.get(step_url(study)).content.decode()


def test_the_failed_checks_code_falls_back_to_the_completion_code(client, study):
    Study.objects.filter(pk=study.pk).update(failed_checks_code="")
    AttentionCheckFactory(study=study, after_item=0, expected_value=2)
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    finish(client, study, value=1)
    participant = Participant.objects.get()
    assert participant.flagged_for_exclusion and participant.completion_code == "C0MPLETE"


def test_refresh_and_reopening_the_link_resume_on_the_same_item(client, study):
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    answer_current(client, study, 3)
    position = current_position(client, study)
    assert current_position(client, study) == position  # refresh
    enter(client, study, "PID1")  # the Prolific link again, same browser
    assert current_position(client, study) == position
    other_browser = Client()
    enter(other_browser, study, "PID1")  # another browser: the id resumes, never a second enrollment
    assert current_position(other_browser, study) == position
    assert Participant.objects.count() == 1


def test_a_stale_post_stores_nothing_new_and_redirects_to_the_current_item(client, study):
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    first, _ = answer_current(client, study, 3)
    second = current_position(client, study)
    # Re-posting the answered item (back button, double click) with another value: a no-op.
    response = client.post(step_url(study), {"step": "items", "position": first, "value": 1})
    assert response.status_code == 302 and response["Location"] == step_url(study)
    # Answering ahead of the current item: nothing stored.
    ahead = Participant.objects.get().assignments.exclude(position__in=[first, second]).get().position
    assert client.post(step_url(study), {"step": "items", "position": ahead, "value": 1}).status_code == 302
    # A page of an earlier step (the consent form, from another tab): nothing happens.
    assert client.post(step_url(study), {"step": "consent", "decision": "decline"}).status_code == 302
    assert list(Rating.objects.values_list("assignment__position", "value")) == [(first, 3)]
    assert current_position(client, study) == second
    assert Participant.objects.get().status == Participant.Status.ACTIVE


def test_tampered_answers_are_refused_and_store_nothing(client, study):
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    position = current_position(client, study)
    assert (
        client.post(step_url(study), {"step": "items", "position": position, "value": 7}).status_code == 400
    )
    assert client.post(step_url(study), {"step": "items", "position": position}).status_code == 400
    assert client.post(step_url(study), {"step": "items", "position": 999, "value": 3}).status_code == 403
    assert client.post(step_url(study), {"step": "items", "position": "x", "value": 3}).status_code == 400
    assert not Rating.objects.exists()


def test_a_participant_only_ever_sees_and_answers_their_own_items(client, study):
    enter(client, study, "ALICE")
    consent_and_instructions(client, study)
    bob = Client()
    enter(bob, study, "BOB")
    consent_and_instructions(bob, study)
    alice_p, bob_p = Participant.objects.get(external_id="ALICE"), Participant.objects.get(external_id="BOB")
    bob_texts = set(bob_p.assignments.values_list("response__text", flat=True))
    alice_texts = set(alice_p.assignments.values_list("response__text", flat=True))
    # Alice posts while naming Bob's assignment and participant in every way a form could: the server uses
    # only her session's participant, so the answer lands on her own current item.
    bob_assignment = bob_p.assignments.order_by("position").first()
    for _ in range(3):
        page = client.get(step_url(study)).content.decode()
        assert not any(text in page for text in bob_texts - alice_texts)
        client.post(
            step_url(study),
            {
                "step": "items",
                "position": current_position(client, study),
                "value": 1,
                "assignment": bob_assignment.pk,
                "assignment_id": bob_assignment.pk,
                "participant": bob_p.pk,
                "PROLIFIC_PID": "BOB",
            },
        )
    assert not Rating.objects.filter(assignment__participant=bob_p).exists()
    assert Rating.objects.filter(assignment__participant=alice_p).count() == 3
    assert current_position(bob, study) == bob_assignment.position  # Bob is untouched
    # A browser with no session reaches no one's items.
    assert Client().get(step_url(study)).status_code == 302
    assert Client().post(step_url(study), {"step": "items", "position": 0, "value": 1}).status_code == 302
    assert Rating.objects.count() == 3


def test_an_mturk_preview_describes_the_task_and_writes_nothing(client, study):
    response = client.get(f"/s/{study.slug}/", {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "H1"})
    assert response.status_code == 200 and "Accept the HIT" in response.content.decode()
    assert not Participant.objects.exists()


def test_an_mturk_worker_submits_the_hit_to_their_validated_mturk_host(client, study):
    query = {
        "workerId": "W1",
        "assignmentId": "A1",
        "hitId": "H1",
        "turkSubmitTo": "https://workersandbox.mturk.com",
    }
    client.get(f"/s/{study.slug}/", query)
    consent_and_instructions(client, study)
    finish(client, study)
    page = client.get(step_url(study)).content.decode()
    assert 'action="https://workersandbox.mturk.com/mturk/externalSubmit"' in page
    assert 'name="assignmentId" value="A1"' in page and 'value="C0MPLETE"' in page
    participant = Participant.objects.get()
    assert (
        participant.platform,
        participant.platform_session_id,
        participant.platform_study_id,
        participant.platform_data,
    ) == ("mturk", "A1", "H1", {"submit_to": "https://workersandbox.mturk.com"})

    evil = Client()
    evil.get(
        f"/s/{study.slug}/", {**query, "workerId": "W2", "turkSubmitTo": "https://mturk.com.evil.example"}
    )
    consent_and_instructions(evil, study)
    finish(evil, study)
    assert 'action="https://www.mturk.com/mturk/externalSubmit"' in evil.get(step_url(study)).content.decode()


def test_a_staff_preview_is_not_counted_and_works_before_launch(staff_client):
    study = rating_study_build(conditions=1, prompts=3, quota_per_condition=1, state=Study.State.DRAFT)
    response = staff_client.get(f"/s/{study.slug}/", {"preview": "1"}, follow=True)
    assert "Staff preview" in response.content.decode()
    preview = Participant.objects.get()
    assert preview.is_preview
    consent_and_instructions(staff_client, study)
    finish(staff_client, study)
    assert Participant.objects.get().status == Participant.Status.COMPLETED
    Study.objects.filter(pk=study.pk).update(state=Study.State.LIVE)
    enter(Client(), study, "REAL1")  # the single place is still free
    assert Participant.objects.filter(is_preview=False).count() == 1


def test_preview_is_ignored_for_visitors_who_are_not_staff(client, study):
    response = client.get(f"/s/{study.slug}/", {"preview": "1"})
    assert "Please open this study from Prolific" in response.content.decode()
    assert not Participant.objects.exists()


def test_the_teq_is_asked_when_the_study_wants_it_and_scored(client):
    study = rating_study_build(ask_teq=True)
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    assert current_step(client, study)[0] == "teq"
    incomplete = {f"teq_{n}": "often" for n in range(1, 16)}
    response = post_step(client, study, **incomplete)
    page = response.content.decode()
    assert response.status_code == 400 and "Please answer every statement" in page
    # The summary links to the missing statement's first answer, and takes the focus.
    assert 'href="#teq_16-1"' in page and 'id="teq_16-1"' in page and 'href="#teq_15-1"' not in page
    assert re.search(r'<div class="error-summary"[^>]* autofocus', page)
    assert Participant.objects.get().teq_answers is None
    response = post_step(client, study, **incomplete, teq_16="often")
    assert response.status_code == 302
    participant = Participant.objects.get()
    # "Often" everywhere: 8 positive items × 3 + 8 reverse-scored items × 1.
    assert participant.teq_score == 32 and participant.teq_answers["16"] == "often"
    assert current_step(client, study)[0] == "items"


def test_a_participant_silent_past_the_time_limit_sees_a_clear_page(client, study):
    enter(client, study, "PID1")
    Participant.objects.update(last_seen_at=timezone.now() - timedelta(minutes=study.time_limit_minutes + 5))
    page = client.get(step_url(study)).content.decode()
    assert "Your time for this study ran out" in page
    assert Participant.objects.get().status == Participant.Status.TIMED_OUT
    assert "Your time for this study ran out" in enter(Client(), study, "PID1").content.decode()


def test_stop_and_return_gives_the_place_back_and_cannot_be_undone(client, study):
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    assert "Do you want to stop?" in client.get(f"/s/{study.slug}/return/").content.decode()
    client.post(f"/s/{study.slug}/return/")
    assert "You have stopped the study" in client.get(step_url(study)).content.decode()
    participant = Participant.objects.get()
    assert participant.status == Participant.Status.RETURNED and not participant.assignments.exists()
    assert "You have stopped the study" in enter(Client(), study, "PID1").content.decode()


def test_a_paused_study_turns_newcomers_away_but_lets_started_participants_finish(client, study):
    enter(client, study, "PID1")
    consent_and_instructions(client, study)
    Study.objects.filter(pk=study.pk).update(state=Study.State.PAUSED)
    page = enter(Client(), study, "PID2").content.decode()
    assert "paused" in page
    finish(client, study)
    assert "C0MPLETE" in client.get(step_url(study)).content.decode()
    assert Participant.objects.count() == 1


def test_a_full_study_says_so_and_writes_nothing(client):
    study = rating_study_build(conditions=1, quota_per_condition=1)
    enter(Client(), study, "PID1")
    page = enter(client, study, "PID2").content.decode()
    assert "All places are taken" in page
    assert Participant.objects.count() == 1


def test_bad_links_get_a_friendly_page_and_are_never_echoed(client, study):
    assert client.get("/s/no-such-study/", {"PROLIFIC_PID": "X"}).status_code == 404
    for bad in ["{{%PROLIFIC_PID%}}", "<script>alert(1)</script>", "A" * 500, "\x00\x01binary"]:
        response = client.get(f"/s/{study.slug}/", {"PROLIFIC_PID": bad})
        assert response.status_code == 400
        assert "This link does not work" in response.content.decode()
        assert bad not in response.content.decode() and "<script>alert" not in response.content.decode()
    assert not Participant.objects.exists()


def test_a_link_without_an_id_explains_where_to_start(client, study):
    assert "Please open this study from Prolific" in client.get(f"/s/{study.slug}/").content.decode()


def test_a_direct_link_study_generates_an_id_on_start(client):
    study = rating_study_build(platform=Study.Platform.NONE)
    assert "Start the study" in client.get(f"/s/{study.slug}/").content.decode()
    assert not Participant.objects.exists()
    response = client.post(f"/s/{study.slug}/start/", follow=True)
    assert "Information and consent" in response.content.decode()
    participant = Participant.objects.get()
    assert participant.external_id.startswith("direct-") and participant.platform == "none"
    client.post(f"/s/{study.slug}/start/")  # a second click resumes
    assert Participant.objects.count() == 1


def test_corpus_text_is_escaped_on_every_page(client, study):
    evil = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    for response in study.prompts.first().responses.all():
        response.text = evil
        response.save()
    study.prompts.update(situation=evil, speaker_utterance=evil)
    Study.objects.filter(pk=study.pk).update(
        consent_text=evil, instructions_text=evil, worked_examples=[{"response": evil, "explanation": evil}]
    )
    enter(client, study, "PID1")
    pages = [client.get(step_url(study)).content.decode()]
    post_step(client, study, decision="agree")
    pages.append(client.get(step_url(study)).content.decode())
    post_step(client, study)
    pages.append(client.get(step_url(study)).content.decode())
    for page in pages:
        assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in pages[-1]


def test_the_periodic_task_releases_stale_participants(client, study):
    enter(client, study, "PID1")
    enter(Client(), study, "PID2")
    Participant.objects.filter(external_id="PID1").update(last_seen_at=timezone.now() - timedelta(days=1))
    assert release_stale_participants.apply().get() == 1
    assert Participant.objects.get(external_id="PID1").status == Participant.Status.TIMED_OUT
    assert Participant.objects.get(external_id="PID2").status == Participant.Status.ACTIVE
