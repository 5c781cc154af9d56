"""Who reaches analyses: staff and Analysts only. Anonymous visitors and participants (whose session holds only a
participant id) are sent to the login page or refused, on every analysis and API URL."""

import pytest
from django.urls import reverse

from analysis.tokens import analyst_token_issue

pytestmark = pytest.mark.django_db


def _page_urls(slug):
    return [
        reverse("analysis:index"),
        reverse("analysis:dashboard", args=[slug]),
        reverse("analysis:figure", args=[slug, "ratings_by_condition", "png"]),
        reverse("analysis:figure", args=[slug, "top_share_by_emotion", "svg"]),
        reverse("analysis:export", args=[slug, "ratings"]),
        reverse("analysis:export", args=[slug, "participants"]),
        reverse("analysis:export", args=[slug, "responses"]),
        reverse("analysis:table", args=[slug, "tests"]),
        reverse("analysis:bundle", args=[slug]),
    ]


def _api_urls(slug):
    return [
        reverse("api:study-list"),
        reverse("api:study-detail", args=[slug]),
        reverse("api:study-aggregates", args=[slug]),
        reverse("api:study-export", args=[slug, "ratings"]),
        reverse("api:study-export", args=[slug, "participants"]),
        reverse("api:study-export", args=[slug, "responses"]),
        reverse("api:study-table", args=[slug, "main_tests"]),
    ]


def _as_participant(client, study):
    """A participant's session: what the entry page leaves behind (the participant's id under the study's key)."""
    participant = study.participants.first()
    session = client.session
    session[f"ratings:participant:{study.pk}"] = participant.pk
    session.save()
    return client


@pytest.mark.parametrize("who", ["anonymous", "participant"])
def test_pages_send_anonymous_visitors_and_participants_to_the_login(client, rated_study, who):
    if who == "participant":
        _as_participant(client, rated_study)
    for url in _page_urls(rated_study.slug):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("analysis:login")), url


@pytest.mark.parametrize("who", ["anonymous", "participant"])
def test_the_api_refuses_anonymous_visitors_and_participants(client, rated_study, who):
    if who == "participant":
        _as_participant(client, rated_study)
    for url in _api_urls(rated_study.slug):
        assert client.get(url).status_code in (401, 403), url


def test_signed_in_users_who_are_not_analysts_are_refused(client, django_user_model, rated_study):
    user = django_user_model.objects.create_user(username="someone", password="x-pass-12345")
    client.force_login(user)
    for url in _page_urls(rated_study.slug) + _api_urls(rated_study.slug):
        assert client.get(url).status_code == 403, url
    token = analyst_token_issue(user=user)
    for url in _api_urls(rated_study.slug):
        assert client.get(url, HTTP_AUTHORIZATION=f"Token {token}").status_code == 403, url


def test_analysts_reach_every_url(analyst_client, rated_study):
    for url in _page_urls(rated_study.slug) + _api_urls(rated_study.slug):
        response = analyst_client.get(url)
        assert response.status_code == 200, url
        if hasattr(response, "streaming_content"):
            b"".join(response.streaming_content)


def test_staff_reach_the_dashboard_and_the_api(staff_client, rated_study):
    assert staff_client.get(reverse("analysis:dashboard", args=[rated_study.slug])).status_code == 200
    assert staff_client.get(reverse("api:study-detail", args=[rated_study.slug])).status_code == 200


def test_the_api_accepts_a_token_and_allows_no_writes(client, analyst, rated_study):
    token = analyst_token_issue(user=analyst)
    auth = {"HTTP_AUTHORIZATION": f"Token {token}"}
    for url in _api_urls(rated_study.slug):
        assert client.get(url, **auth).status_code == 200, url
        for method in (client.post, client.put, client.patch, client.delete):
            assert method(url, {}, **auth).status_code == 405, (method, url)


def test_unknown_studies_exports_and_figures_are_404(analyst_client, rated_study):
    assert analyst_client.get(reverse("analysis:dashboard", args=["nope"])).status_code == 404
    assert (
        analyst_client.get(reverse("analysis:export", args=[rated_study.slug, "secrets"])).status_code == 404
    )
    assert (
        analyst_client.get(reverse("analysis:figure", args=[rated_study.slug, "x", "png"])).status_code == 404
    )
    assert (
        analyst_client.get(
            reverse("analysis:figure", args=[rated_study.slug, "ratings_by_condition", "gif"])
        ).status_code
        == 404
    )
    assert analyst_client.get(reverse("api:study-aggregates", args=["nope"])).status_code == 404


def test_an_analyst_who_is_not_staff_signs_in_on_the_analysis_login(client, analyst, rated_study):
    dashboard = reverse("analysis:dashboard", args=[rated_study.slug])
    login = client.get(dashboard, follow=True)
    assert login.status_code == 200 and b'name="password"' in login.content
    response = client.post(
        reverse("analysis:login") + f"?next={dashboard}",
        {"username": "ana", "password": "analyst-pass-123", "next": dashboard},
    )
    assert response.status_code == 302 and response["Location"] == dashboard
    assert client.get(dashboard).status_code == 200


def test_a_participant_who_entered_through_the_study_link_cannot_reach_analyses(client, settings, db):
    """A real participant's browser: enter /s/<slug>/ as a Prolific participant, then try every analysis URL."""
    from studies.models import Study

    from .builders import build_rating_study, participants_from_counts

    settings.RATELIMIT_ENABLED = False
    study = build_rating_study(
        slug="live", conditions=["human", "gpt4"], participants=participants_from_counts("human", {2: 10})
    ).study
    Study.objects.filter(pk=study.pk).update(
        state=Study.State.LIVE, platform=Study.Platform.PROLIFIC, items_per_participant=3,
        consent_text="Consent?", completion_code="DONE",
    )  # fmt: skip
    entered = client.get(
        f"/s/{study.slug}/", {"PROLIFIC_PID": "PIDREAL", "STUDY_ID": "S1", "SESSION_ID": "X1"}, follow=True
    )
    assert entered.status_code == 200
    assert study.participants.filter(external_id="PIDREAL").exists()
    assert settings.PARTICIPANT_TICKET_COOKIE_NAME in client.cookies  # the participant's ticket
    for url in _page_urls(study.slug):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("analysis:login")), url
    for url in _api_urls(study.slug):
        assert client.get(url).status_code in (401, 403), url


def test_the_dashboard_keeps_the_chosen_baseline_in_its_links(analyst_client, rated_study):
    from analysis import snapshots

    snapshots.snapshot_compute(study_id=rated_study.pk, baseline="gpt4", no_exclusions=False)
    page = analyst_client.get(reverse("analysis:dashboard", args=[rated_study.slug]), {"baseline": "gpt4"})
    html = page.content.decode()
    assert "human vs gpt4" in html
    assert f"/analysis/{rated_study.slug}/tables/main_tests.csv?baseline=gpt4" in html
    table = analyst_client.get(
        reverse("analysis:table", args=[rated_study.slug, "main_tests"]), {"baseline": "gpt4"}
    )
    body = b"".join(table.streaming_content).decode()
    assert "human vs gpt4" in body


def test_the_dashboard_works_when_the_cache_is_down(analyst_client, rated_study, settings):
    """The analysis cache fails open: an unreachable Redis costs a recomputation, not an error page."""
    settings.CACHES = {
        **settings.CACHES,
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        },
    }
    # (changing settings.CACHES makes Django drop its cache connections: the next access uses this one)
    assert analyst_client.get(reverse("analysis:dashboard", args=[rated_study.slug])).status_code == 200
