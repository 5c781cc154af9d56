"""A newcomer to a live rating study enrolled by one PostgreSQL statement (migration 0013,
studies/enrol_statement.py): the same choices and rows as the Python path for the same draws, nothing written
in the cases it leaves to that path, and the study's quotas and balance kept under a race."""

import itertools
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from studies import enrol_statement, participants
from studies.models import Assignment, Participant, Response, Study
from studies.participants import StudyFull, participant_enroll, participant_return
from tests.factories import AttentionCheckFactory, questionnaire_study_create, rating_study_build
from tests.studies.test_assignment_races import race

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

# The columns that differ between two enrolments of the same person anyway.
_OWN = ("id", "started_at", "last_seen_at")


class _Rollback(Exception):
    pass


def _arrivals(study, arrivals, monkeypatch, settings, *, statement: bool) -> list[tuple]:
    """Enrols `arrivals` ids with the same sequence of seeds (a preview, a completion and a return among
    them), and returns what each got: its row and its pages. Everything is rolled back after."""
    settings.PARTICIPANT_ENROL_STATEMENT = statement
    draw = (101 + 7919 * i for i in itertools.count())
    monkeypatch.setattr(participants, "_participant_seed", lambda _study: next(draw))
    got: list[tuple] = []
    try:
        with transaction.atomic():
            with CaptureQueriesContext(connection) as queries:
                for i in range(arrivals):
                    if i == 3:
                        participant_enroll(study=study, external_id="staff", is_preview=True)
                    try:
                        p = participant_enroll(study=study, external_id=f"PID{i}")
                    except StudyFull:
                        got.append((f"PID{i}", "full"))
                        continue
                    pages = list(
                        Assignment.objects.filter(participant=p)
                        .order_by("position")
                        .values_list("position", "kind", "response_id", "attention_check_id")
                    )
                    row = {
                        k: v
                        for k, v in model_to_dict(Participant.objects.get(pk=p.pk)).items()
                        if k not in _OWN
                    }
                    got.append((f"PID{i}", row, pages))
                    if i == 4:
                        Participant.objects.filter(pk=p.pk).update(status=Participant.Status.COMPLETED)
                    if i == 6:
                        participant_return(participant=p)
            used = sum("rating_enrol_in_place" in q["sql"] for q in queries.captured_queries)
            got.append(("statements used", used))
            raise _Rollback
    except _Rollback:
        pass
    return got


def test_the_statement_makes_the_python_paths_choices_for_the_same_draws(monkeypatch, settings):
    study = rating_study_build(conditions=3, prompts=9, items_per_participant=4, quota_per_condition=4)
    study.conditions.filter(name="arm1").update(quota=2)
    # A flagged response and a response of another sample are never dealt.
    flagged = Response.objects.filter(condition__name="arm0").order_by("id").values_list("pk", flat=True)[0]
    Response.objects.filter(pk=flagged).update(review=Response.Review.FLAGGED)
    for after in (0, 2, 2, 9):
        AttentionCheckFactory(study=study, after_item=after)
    # 12 arrivals for 4 + 2 + 4 places, one of them returned
    by_statement = _arrivals(study, 12, monkeypatch, settings, statement=True)
    by_python = _arrivals(study, 12, monkeypatch, settings, statement=False)

    assert by_statement[-1] == ("statements used", 12) and by_python[-1] == ("statements used", 0)
    assert by_statement[:-1] == by_python[:-1]
    outcomes = Counter("full" if entry[1] == "full" else entry[1]["condition"] for entry in by_python[:-1])
    assert outcomes["full"] == 1 and len(outcomes) == 4  # every condition took someone, the last one was full
    pages = [entry[2] for entry in by_python[:-1] if entry[1] != "full"]
    # The checks after 0 and 2 regular items, the one after 9 at the end; the responses in varying orders.
    assert all(
        [kind for _, kind, _, _ in p]
        == [
            "attention",
            "response",
            "response",
            "attention",
            "attention",
            "response",
            "response",
            "attention",
        ]
        for p in pages
    )
    assert len({tuple(r for _, kind, r, _ in p if kind == "response") for p in pages}) > 1


def _counts() -> tuple[int, int]:
    return Participant.objects.count(), Assignment.objects.count()


def _enrol(study, external_id="new"):
    now = timezone.now()
    fields = dict.fromkeys(
        ("platform_study_id", "platform_session_id", "mturk_assignment_id", "mturk_hit_id"), ""
    )
    return enrol_statement.enrol(study, external_id, seed=5, now=now, platform=Study.Platform.NONE, **fields)


def test_what_the_statement_leaves_to_the_python_path_it_does_not_write(settings):
    study = rating_study_build(conditions=1, prompts=6, items_per_participant=3, quota_per_condition=2)
    first = participant_enroll(study=study, external_id="first")
    before = _counts()

    assert _enrol(study, "first") == ("existing", None)
    for state in (Study.State.PAUSED, Study.State.DRAFT, Study.State.CLOSED):
        Study.objects.filter(pk=study.pk).update(state=state)
        assert _enrol(study) == ("fallback", None)
    Study.objects.filter(pk=study.pk).update(state=Study.State.LIVE)
    wave = rating_study_build(conditions=1, prompts=3, items_per_participant=2, parent=study)
    assert _enrol(wave) == ("fallback", None)
    questionnaire = questionnaire_study_create(slug="q-live", title="Q", state=Study.State.LIVE)
    assert _enrol(questionnaire) == ("fallback", None)
    # Someone whose hold lapsed: the Python path releases them first.
    Participant.objects.filter(pk=first.pk).update(last_seen_at=timezone.now() - timedelta(days=1))
    assert _enrol(study) == ("fallback", None)
    Participant.objects.filter(pk=first.pk).update(last_seen_at=timezone.now())
    study.conditions.update(enrolling=False)
    assert _enrol(study) == ("full", None)
    study.conditions.update(enrolling=True)
    participant_enroll(study=study, external_id="second")
    assert _enrol(study) == ("full", None)  # both places taken
    assert _counts() == (before[0] + 1, before[1] + 3)  # only "second", through participant_enroll


def test_a_lapsed_participant_is_released_by_the_python_path_and_the_newcomer_enrolled(settings):
    study = rating_study_build(conditions=1, prompts=6, items_per_participant=3, quota_per_condition=1)
    gone = participant_enroll(study=study, external_id="gone")
    Participant.objects.filter(pk=gone.pk).update(last_seen_at=timezone.now() - timedelta(days=1))
    newcomer = participant_enroll(study=study, external_id="new")
    gone.refresh_from_db()
    assert gone.status == Participant.Status.TIMED_OUT and not gone.assignments.exists()
    assert newcomer.assignments.count() == 3


@pytest.mark.django_db(transaction=True)
def test_arrivals_racing_through_the_statement_keep_quotas_balance_and_one_participant_per_id(
    requires_postgres,
):
    study = rating_study_build(conditions=3, prompts=12, items_per_participant=3, quota_per_condition=8)
    ids = [f"PID{i % 20:02d}" for i in range(40)]  # 20 people, each arriving twice at once: 24 places

    results, errors = race(lambda i: participant_enroll(study=study, external_id=ids[i]), len(ids))

    assert not errors, errors
    people = Participant.objects.filter(study=study)
    assert people.count() == 20 and {p.external_id for p in people} == set(ids)
    for external_id, arrivals in itertools.groupby(
        sorted(results.items(), key=lambda r: ids[r[0]]), key=lambda r: ids[r[0]]
    ):
        assert len({p.pk for _, p in arrivals}) == 1, external_id  # both arrivals are the same participant
    sizes = Counter(people.values_list("condition__name", flat=True))
    assert max(sizes.values()) - min(sizes.values()) <= 1, sizes
    for participant in people:
        responses = list(participant.assignments.values_list("response_id", flat=True))
        assert len(responses) == len(set(responses)) == 3
    # Each response's tally (kept by the triggers) is its pages, and the pages are spread evenly.
    for condition in study.conditions.all():
        tallies = dict(
            Response.objects.filter(condition=condition).values_list("id", "tally__live_assignments")
        )
        pages = Counter(
            Assignment.objects.filter(response__condition=condition).values_list("response_id", flat=True)
        )
        assert {rid: tallies[rid] or 0 for rid in tallies} == {rid: pages.get(rid, 0) for rid in tallies}
        assert max(pages.values()) - min(tallies[rid] or 0 for rid in tallies) <= 1, pages


def test_a_condition_with_fewer_responses_than_pages_gets_the_same_pages_both_ways(monkeypatch, settings):
    # Responses flagged after the launch can leave a condition fewer than the study shows; a check placed
    # after more items than there are then comes last, as the Python path places it.
    study = rating_study_build(conditions=2, prompts=3, items_per_participant=5, quota_per_condition=5)
    for after in (1, 7):
        AttentionCheckFactory(study=study, after_item=after)

    by_statement = _arrivals(study, 6, monkeypatch, settings, statement=True)
    by_python = _arrivals(study, 6, monkeypatch, settings, statement=False)

    assert by_statement[-1] == ("statements used", 6)
    assert by_statement[:-1] == by_python[:-1]
    assert [kind for _, kind, _, _ in by_python[0][2]] == [
        "response",
        "attention",
        "response",
        "response",
        "attention",
    ]
