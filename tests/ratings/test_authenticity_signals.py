"""Authenticity signals posted with the step forms: stored with the answer, no extra request, never an error;
the hidden instruction's field; the review of a flag; two pages of one participant at once."""

import json

import pytest
from django.test import Client

from kinds.rating.models import Rating
from studies.authenticity import NO_SIGNALS, TRAP_FIELD, authenticity_review, trap_word
from studies.models import Participant, ParticipantAuthenticity
from studies.selectors import study_status
from tests.concurrency import race
from tests.factories import rating_study_build
from tests.ratings.helpers import consent_and_instructions, current_position, enter, step_url

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("pages_seconds_apart")]

MOUSE = {"t": 12000, "fi": 400, "pm": 80, "pd": 1, "cl": 1, "c": {"au": [], "sw": 1280, "sh": 800}}
SCRIPTED = {"t": 60, "sc": 1, "c": {"au": [], "sw": 1280, "sh": 800}}
JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture
def study():
    return rating_study_build(conditions=1, prompts=6, items_per_participant=3)


def _on_items(client, study, pid="PID1"):
    enter(client, study, pid)
    consent_and_instructions(client, study)
    return Participant.objects.get(external_id=pid)


def _answer(client, study, sig=None, **extra):
    data = {"step": "items", "position": current_position(client, study), "value": 3, **extra}
    if sig is not None:
        data["sig"] = sig if isinstance(sig, str) else json.dumps(sig)
    return client.post(step_url(study), data, **JSON)


def test_signals_come_with_each_answer_and_the_score_follows(study):
    client = Client(HTTP_USER_AGENT="Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/120.0")
    participant = _on_items(client, study)
    for _ in range(3):
        assert _answer(client, study, MOUSE).status_code == 200
    row = ParticipantAuthenticity.objects.get(participant=participant)
    assert sorted(row.pages) == ["items:0", "items:1", "items:2"]
    assert {k: v for k, v in row.pages["items:0"].items() if k not in ("rx", "sv")} == {
        k: v for k, v in MOUSE.items() if k != "c"
    }
    assert row.pages["items:1"]["sv"] == 20_000  # the server received the page before it 20 s earlier
    assert row.client == {"au": [], "sw": 1280, "sh": 800, "ua": "desktop"}
    assert (row.score, row.flagged, row.reasons) == (100, False, [])
    assert Rating.objects.filter(assignment__participant=participant).count() == 3


def test_a_scripted_participant_is_flagged_but_completes_with_their_code(study):
    client = Client()
    participant = _on_items(client, study)
    for _ in range(3):
        _answer(client, study, SCRIPTED)
    participant.refresh_from_db()
    assert participant.status == Participant.Status.COMPLETED and participant.completion_code == "C0MPLETE"
    row = participant.authenticity
    assert row.flagged and row.review == ParticipantAuthenticity.Review.OPEN
    assert any(reason.startswith("scripted clicks: 3 of 3 pages") for reason in row.reasons)
    assert study_status(study=study)["totals"]["authenticity_flagged"] == 1


@pytest.mark.parametrize("sig", ["{not json", json.dumps({"t": "soon", "c": "x"}), "x" * 5000])
def test_malformed_signals_are_ignored_and_the_answer_stored(study, sig):
    client = Client()
    participant = _on_items(client, study)
    assert _answer(client, study, sig).status_code == 200
    assert Rating.objects.filter(assignment__participant=participant).count() == 1
    assert not ParticipantAuthenticity.objects.filter(participant=participant).exists()


def test_a_participant_without_javascript_completes_with_no_signals_and_no_flag(study):
    client = Client()
    participant = _on_items(client, study)
    for _ in range(3):
        position = current_position(client, study)
        assert (
            client.post(step_url(study), {"step": "items", "position": position, "value": 1}).status_code
            == 302
        )
    participant.refresh_from_db()
    assert participant.status == Participant.Status.COMPLETED
    assert not ParticipantAuthenticity.objects.filter(participant=participant).exists()
    assert study_status(study=study)["totals"]["authenticity_flagged"] == 0


def test_the_hidden_instruction_is_on_the_pages_only_when_the_study_sets_it(study):
    client = Client()
    enter(client, study, "PID1")
    assert TRAP_FIELD not in client.get(step_url(study)).content.decode()
    study.trap_hidden_instruction = True
    study.save(update_fields=["trap_hidden_instruction"])
    page = client.get(step_url(study)).content.decode()
    assert trap_word(study) in page and f'name="{TRAP_FIELD}"' in page and 'aria-hidden="true"' in page


def test_the_word_typed_into_the_hidden_field_flags_the_participant(study):
    study.trap_hidden_instruction = True
    study.save(update_fields=["trap_hidden_instruction"])
    client = Client()
    participant = _on_items(client, study)
    _answer(client, study, MOUSE, **{TRAP_FIELD: trap_word(study).upper()})
    row = ParticipantAuthenticity.objects.get(participant=participant)
    assert row.pages["items:0"]["trap"] == 1 and row.flagged


def test_a_review_clears_or_confirms_a_flag_with_who_and_when(study, django_user_model):
    researcher = django_user_model.objects.create_user("researcher", password="x" * 14, is_staff=True)
    client = Client()
    participant = _on_items(client, study)
    _answer(client, study, SCRIPTED)
    assert study_status(study=study)["totals"]["authenticity_flagged"] == 1
    authenticity_review(participant=participant, decision="cleared", user=researcher)
    row = ParticipantAuthenticity.objects.get(participant=participant)
    assert row.review == "cleared" and row.reviewed_by == researcher and row.reviewed_at is not None
    assert row.flagged  # the score still says what it saw; the review decides
    assert study_status(study=study)["totals"]["authenticity_flagged"] == 0
    with pytest.raises(ValueError):
        authenticity_review(participant=participant, decision="rejected", user=researcher)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_pages_of_one_participant_arriving_together_are_all_kept(requires_postgres):
    from studies.authenticity import signals_record

    study = rating_study_build(conditions=1, prompts=6, items_per_participant=3)
    client = Client()
    participant = _on_items(client, study)

    def record(i):
        return signals_record(
            participant=participant, step="q", position=i + 1, raw=json.dumps({**MOUSE, "t": 10000 + i})
        )

    results, errors = race(record, 24)
    assert not errors
    row = ParticipantAuthenticity.objects.get(participant=participant)
    assert len(row.pages) == 24 and row.pages["q:24"]["t"] == 10023
    assert row.score == 100


@pytest.mark.django_db(transaction=True)
def test_signals_are_stored_with_the_answer_or_not_at_all(monkeypatch):
    """The signals share the answer's transaction: an answer that fails after its rating was written leaves
    neither the rating nor the page's signals; the next attempt stores both."""
    from kinds.rating import services

    study = rating_study_build(conditions=1, prompts=6, items_per_participant=3)
    client = Client(raise_request_exception=False)
    participant = _on_items(client, study)
    store = services._answer_store

    def store_then_fail(*args, **kwargs):
        store(*args, **kwargs)
        raise RuntimeError("the answer failed after its rating was written")

    monkeypatch.setattr(services, "_answer_store", store_then_fail)
    assert _answer(client, study, MOUSE).status_code == 500
    assert not Rating.objects.filter(assignment__participant=participant).exists()
    assert not ParticipantAuthenticity.objects.filter(participant=participant).exists()
    monkeypatch.setattr(services, "_answer_store", store)
    assert _answer(client, study, MOUSE).status_code == 200
    assert Rating.objects.filter(assignment__participant=participant).count() == 1
    assert list(ParticipantAuthenticity.objects.get(participant=participant).pages) == ["items:0"]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_one_answer_posted_many_times_at_once_with_signals_is_stored_once_without_deadlock(requires_postgres):
    """A double click, retries and a second tab at once: each request locks the signals' row, then the
    participant's, in one transaction; all succeed, one rating is stored and the page's signals once."""
    study = rating_study_build(conditions=1, prompts=6, items_per_participant=3)
    client = Client()
    participant = _on_items(client, study)
    position = current_position(client, study)

    def post(i):
        tab = Client()
        tab.cookies = client.cookies
        data = {
            "step": "items",
            "position": position,
            "value": 3,
            "sig": json.dumps({**MOUSE, "t": 9000 + i}),
        }
        return tab.post(step_url(study), data, **JSON).status_code

    results, errors = race(post, 12)
    assert not errors and set(results.values()) == {200}, (results, errors)
    assert Rating.objects.filter(assignment__participant=participant).count() == 1
    row = ParticipantAuthenticity.objects.get(participant=participant)
    assert list(row.pages) == [f"items:{position}"] and row.score == 100


def _answer_all(client, study, value_of):
    """Answers every item as a plain form post, `value_of(position, response_id)` giving the value."""
    from studies.models import Assignment

    while (position := current_position(client, study)) is not None:
        page = Assignment.objects.get(participant__external_id="PAIRS", position=position)
        client.post(step_url(study), {"step": "items", "position": position, "value": value_of(page)})


def test_consistency_pairs_show_early_items_again_at_the_end_and_never_count_as_ratings():
    from kinds.rating.frame import rating_rows_frame
    from studies.models import Assignment

    study = rating_study_build(conditions=1, prompts=8, items_per_participant=6, trap_repeat_items=2)
    client = Client()
    participant = _on_items(client, study, "PAIRS")
    pages = list(Assignment.objects.filter(participant=participant).order_by("position"))
    assert [p.kind for p in pages] == ["response"] * 6 + ["repeat"] * 2
    assert [p.response_id for p in pages[6:]] == [p.response_id for p in pages[:2]]  # 6 and 5 items apart
    first = {p.response_id: 3 for p in pages[:6]}
    _answer_all(client, study, lambda page: first[page.response_id] if page.kind == "response" else 1)
    participant.refresh_from_db()
    assert participant.status == Participant.Status.COMPLETED
    assert len(rating_rows_frame(study=study)) == 6  # the second showings are not ratings
    assert study_status(study=study)["totals"]["ratings"] == 6
    row = ParticipantAuthenticity.objects.get(participant=participant)
    # Plain posts send no signals, but the pairs' outcome counts all the same (30; the test's machine-speed
    # answers may add a timing reason of what the answers show).
    assert row.pairs == {"6": 1, "7": 1} and row.score is not None and row.score <= 70
    assert row.reasons[0] == NO_SIGNALS
    assert row.reasons[1].startswith("inconsistent: 2 of 2 items shown twice answered far apart")


def test_consistent_pairs_cost_nothing_and_a_step_apart_is_consistent():
    from studies.authenticity import pair_far

    assert not pair_far(3, 2, [1, 2, 3]) and pair_far(3, 1, [1, 2, 3])
    assert not pair_far(5, 4, [1, 2, 3, 4, 5]) and not pair_far(5, 3, [1, 2, 3, 4, 5])
    assert pair_far(5, 2, [1, 2, 3, 4, 5]) and pair_far(1, 4, [1, 2, 3, 4, 5])
    assert not pair_far(3, 2, [1, 2, 3, 4]) and pair_far(4, 2, [1, 2, 3, 4])
    study = rating_study_build(conditions=1, prompts=8, items_per_participant=6, trap_repeat_items=3)
    client = Client()
    participant = _on_items(client, study, "PAIRS")
    _answer_all(client, study, lambda page: 2 if page.kind == "response" else 3)
    row = ParticipantAuthenticity.objects.get(participant=participant)
    # Consistent pairs add no reason (the test's machine-speed answers may add a timing reason of what the
    # answers show, as above).
    assert row.pairs == {"6": 0, "7": 0, "8": 0} and row.reasons[0] == NO_SIGNALS
    assert not any(reason.startswith("inconsistent") for reason in row.reasons)
