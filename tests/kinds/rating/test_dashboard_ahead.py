"""The dashboard never computes in the request: it shows the last result computed ahead (by a worker, or a
background thread without a broker), says whether it is current, and asks for a new one when the data changed."""

import re
import time

import pytest
from django.core.cache import cache
from django.urls import reverse

from analysis import snapshots
from tests.analysis.builders import Rated, build_rating_study, participants_from_counts

pytestmark = pytest.mark.django_db


@pytest.fixture
def dispatched(monkeypatch):
    """The computes handed to the workers (the broker is the edge: what reaches it is recorded instead)."""
    calls = []
    monkeypatch.setattr(snapshots, "_dispatch", lambda **kwargs: calls.append(kwargs))
    return calls


def _add_participant(study, values):
    """New ratings arrive: one more participant of an existing condition, finished (an unfinished one is
    excluded by the declared rules)."""
    from kinds.rating.models import Rating
    from studies.models import Assignment, Participant

    cond = study.conditions.get(name="human")
    responses = list(cond.responses.order_by("id")[: len(values)])
    person = Participant.objects.create(
        study=study, condition=cond, external_id=f"late-{time.time_ns()}", status=Participant.Status.COMPLETED
    )
    for position, (response, value) in enumerate(zip(responses, values, strict=False)):
        assignment = Assignment.objects.create(
            participant=person, position=position, kind=Assignment.Kind.RESPONSE, response=response
        )
        Rating.objects.create(assignment=assignment, value=value, response_time_ms=4000)


def test_a_first_view_asks_the_workers_once_and_says_it_is_computing(analyst_client, rated_study, dispatched):
    url = reverse("analysis:dashboard", args=[rated_study.slug])
    page = analyst_client.get(url).content.decode()
    assert "Computing the analysis…" in page
    assert 'role="status"' in page and 'data-computing="true"' in page
    assert "<figure>" not in page  # nothing computed yet: no stale numbers pretending to be results
    analyst_client.get(url)
    status = analyst_client.get(reverse("analysis:dashboard_status", args=[rated_study.slug])).json()
    assert status == {"current": False, "computing": True, "computed_at": None, "fingerprint": None}
    # Asked once, then the other side of the "No exclusions" switch, so that the switch finds it ready.
    assert dispatched == [
        {"study_id": rated_study.pk, "baseline": None, "no_exclusions": False},
        {"study_id": rated_study.pk, "baseline": None, "no_exclusions": True},
    ]


def test_the_computed_result_shows_at_once_with_when_it_was_computed(analyst_client, rated_study, dispatched):
    snapshot = snapshots.snapshot_compute(study_id=rated_study.pk, baseline=None, no_exclusions=False)
    snapshots.snapshot_compute(study_id=rated_study.pk, baseline=None, no_exclusions=True)
    assert snapshot is not None and snapshot.analysis.n_rows == 200 and len(snapshot.figures) == 3
    page = analyst_client.get(reverse("analysis:dashboard", args=[rated_study.slug])).content.decode()
    assert "Up to date: computed at" in page and 'data-computing="false"' in page
    assert page.count('<figure tabindex="0" aria-labelledby="figure-') == 3 and page.count("<svg") == 3
    assert "gpt4 vs human" in page
    # The headline names the pre-registered primary test (the rating kind's declaration), not an empty name.
    assert "The pre-registered primary test (each condition" in page and "primary test ()" not in page
    status = analyst_client.get(reverse("analysis:dashboard_status", args=[rated_study.slug])).json()
    assert status["current"] is True and status["computing"] is False
    assert dispatched == []  # nothing to ask for: the result is current


def test_new_ratings_show_the_last_result_while_a_new_one_is_computed(
    analyst_client, rated_study, dispatched
):
    snapshots.snapshot_compute(study_id=rated_study.pk, baseline=None, no_exclusions=False)
    _add_participant(rated_study, [3, 3, 2, 1, 2, 3, 1, 2, 3, 2])
    page = analyst_client.get(reverse("analysis:dashboard", args=[rated_study.slug])).content.decode()
    assert "Computing the analysis of the latest data" in page
    assert "ratings analysed: 200" in page  # the last result, shown at once
    assert len(dispatched) == 2  # and the switch's other side
    for asked in dispatched:
        snapshots.snapshot_compute(**asked)  # what the worker runs
    page = analyst_client.get(reverse("analysis:dashboard", args=[rated_study.slug])).content.decode()
    assert "Up to date" in page and "ratings analysed: 210" in page
    assert len(dispatched) == 2


def test_each_set_of_options_has_its_own_result(analyst_client, rated_study, dispatched):
    snapshots.snapshot_compute(study_id=rated_study.pk, baseline=None, no_exclusions=False)
    page = analyst_client.get(
        reverse("analysis:dashboard", args=[rated_study.slug]), {"baseline": "gpt4", "exclusions": "none"}
    )
    assert "Computing the analysis…" in page.content.decode()
    assert dispatched == [{"study_id": rated_study.pk, "baseline": "gpt4", "no_exclusions": True}]
    assert (
        analyst_client.get(
            reverse("analysis:dashboard", args=[rated_study.slug]), {"baseline": "nope"}
        ).status_code
        == 404
    )


def test_a_failed_compute_releases_its_claim(rated_study, monkeypatch):
    from analysis import services

    cache.add(
        snapshots._running_key(rated_study.pk, snapshots.options_token(baseline=None, no_exclusions=False)), 1
    )

    def broken(**kwargs):
        raise services.AnalysisError("boom")

    monkeypatch.setattr(snapshots, "study_analyze", broken)
    with pytest.raises(services.AnalysisError):
        snapshots.snapshot_compute(study_id=rated_study.pk, baseline=None, no_exclusions=False)
    token = snapshots.options_token(baseline=None, no_exclusions=False)
    assert cache.get(snapshots._running_key(rated_study.pk, token)) is None


def test_beat_asks_for_live_studies_whose_ratings_changed(rated_study, dispatched):
    from studies.models import Study

    Study.objects.filter(pk=rated_study.pk).update(state=Study.State.LIVE)
    assert snapshots.snapshots_refresh() == 2  # under the declared rules and under none (the page's switch)
    assert [d["no_exclusions"] for d in dispatched] == [False, True]
    for asked in dispatched:
        snapshots.snapshot_compute(**asked)
    assert snapshots.snapshots_refresh() == 0  # current: nothing to do
    _add_participant(rated_study, [1, 2, 3])
    assert snapshots.snapshots_refresh() == 2
    for asked in dispatched[2:]:
        snapshots.snapshot_compute(**asked)
    Study.objects.filter(pk=rated_study.pk).update(state=Study.State.CLOSED)
    assert snapshots.snapshots_refresh() == 0  # closed: computed once, its data no longer changes
    cache.clear()
    assert snapshots.snapshots_refresh() == 2


def test_the_page_has_no_inline_script_and_no_meta_refresh(analyst_client, rated_study, dispatched):
    page = analyst_client.get(reverse("analysis:dashboard", args=[rated_study.slug])).content.decode()
    scripts = re.findall(r"<script[^>]*>", page)
    assert scripts and all("src=" in tag for tag in scripts)
    assert all(not body.strip() for body in re.findall(r"<script[^>]*>(.*?)</script>", page, re.S))
    assert "http-equiv" not in page.lower()
    assert 'class="status-refresh"' in page  # the refresh a keyboard reaches without JavaScript


@pytest.mark.django_db(transaction=True)
def test_without_a_broker_a_background_thread_computes_it(client, django_user_model, settings):
    """`make run`: no broker, so the compute runs on a thread of the web process and the request returns."""
    from django.contrib.auth.models import Group

    from analysis.permissions import ANALYSTS_GROUP

    settings.CELERY_TASK_ALWAYS_EAGER = True
    people = participants_from_counts("human", {1: 5, 2: 10, 3: 5}) + [Rated("gpt4", [("sad", 3, 3000)] * 10)]
    study = build_rating_study(slug="threaded", conditions=["human", "gpt4"], participants=people).study
    user = django_user_model.objects.create_user(username="ana2", password="x-pass-123456")
    user.groups.add(Group.objects.get_or_create(name=ANALYSTS_GROUP)[0])
    client.force_login(user)
    url = reverse("analysis:dashboard", args=[study.slug])
    assert "Computing the analysis…" in client.get(url).content.decode()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if client.get(reverse("analysis:dashboard_status", args=[study.slug])).json()["current"]:
            break
        time.sleep(0.3)
    else:
        pytest.fail("the background compute did not finish within a minute")
    assert "Up to date" in client.get(url).content.decode()


def test_with_a_broker_the_compute_is_sent_to_the_registered_task(
    rated_study, settings, monkeypatch, django_capture_on_commit_callbacks
):
    from celery import current_app

    from analysis.tasks import analysis_snapshot_task

    settings.CELERY_TASK_ALWAYS_EAGER = False
    sent = []
    monkeypatch.setattr(current_app, "send_task", lambda name, args: sent.append((name, args)))
    with django_capture_on_commit_callbacks(execute=True):
        snapshots.snapshot_request(study=rated_study, baseline="gpt4", no_exclusions=False)
        assert sent == []  # sent once the transaction commits, never before
    assert sent == [(analysis_snapshot_task.name, (rated_study.pk, "gpt4", False))]
    assert analysis_snapshot_task.name == snapshots.SNAPSHOT_TASK


def test_report_html_is_the_snapshots_own_and_draws_nothing_on_request(
    analyst_client, rated_study, dispatched, monkeypatch
):
    from kinds.rating import figures

    snapshot = snapshots.snapshot_compute(study_id=rated_study.pk, baseline=None, no_exclusions=False)

    def drawn(*args, **kwargs):
        raise AssertionError("a figure drawn on request")

    monkeypatch.setattr(figures, "figure_render", drawn)
    response = analyst_client.get(reverse("analysis:report", args=[rated_study.slug]))
    assert response.status_code == 200 and response.content.decode() == snapshot.report_html
    assert snapshot.report_html.count("<svg") == 3 and "gpt4 vs human" in snapshot.report_html


def test_a_server_loads_the_analysis_modules_the_views_and_kinds_name():
    from config.warm import warm_modules

    modules = warm_modules()
    assert {"analysis.views", "kinds.pairwise.views", "kinds.rating.launch_power"} <= set(modules)
    assert "kinds.rating.live_exclusions" in modules and "kinds.rating.power" in modules
    assert {"openai", "anthropic"} <= set(
        modules
    )  # a live conversation's first reply imports no SDK on the loop
