"""Analysts' API tokens: stored as hashes, expiring, optionally limited to one study, never reading drafts; the
clear-text tokens of before are converted by the migration and keep working."""

import importlib
from datetime import timedelta

import pytest
from django.apps import apps
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token

from analysis.models import AnalystToken
from analysis.tokens import analyst_token_issue
from studies.models import Study
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db


def _get(client, url, key):
    return client.get(url, HTTP_AUTHORIZATION=f"Token {key}")


def test_only_the_hash_is_stored_and_the_key_works(client, analyst, rated_study):
    key = analyst_token_issue(user=analyst)
    row = AnalystToken.objects.get()
    assert key not in (row.key_hash, row.prefix) and len(row.key_hash) == 64 and key.startswith(row.prefix)
    assert _get(client, reverse("api:study-detail", args=[rated_study.slug]), key).status_code == 200
    wrong = key[:-1] + ("1" if key.endswith("0") else "0")  # the last character changed, whatever it was
    assert _get(client, reverse("api:study-detail", args=[rated_study.slug]), wrong).status_code == 401


def test_an_expired_token_is_refused_with_the_reason(client, analyst, rated_study):
    key = analyst_token_issue(user=analyst)
    AnalystToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    answer = _get(client, reverse("api:study-detail", args=[rated_study.slug]), key)
    assert answer.status_code == 401 and "expired" in answer.json()["detail"]


def test_a_study_token_reads_its_study_only_and_no_token_reads_a_draft(client, analyst, rated_study):
    other = StudyFactory(state=Study.State.LIVE)
    draft = StudyFactory(state=Study.State.DRAFT)
    scoped = analyst_token_issue(user=analyst, study=rated_study)
    broad = analyst_token_issue(user=analyst)
    listed = [s["slug"] for s in _get(client, reverse("api:study-list"), scoped).json()["results"]]
    assert listed == [rated_study.slug]
    assert _get(client, reverse("api:study-detail", args=[other.slug]), scoped).status_code == 404
    assert _get(client, reverse("api:study-aggregates", args=[other.slug]), scoped).status_code == 404
    listed = {s["slug"] for s in _get(client, reverse("api:study-list"), broad).json()["results"]}
    assert draft.slug not in listed and {rated_study.slug, other.slug} <= listed
    assert _get(client, reverse("api:study-detail", args=[draft.slug]), broad).status_code == 404


def test_the_command_issues_an_expiring_study_token(client, rated_study, capsys):
    call_command("analyst_token", "reader", "--create", "--study", rated_study.slug, "--days", "7")
    key = capsys.readouterr().out.strip()
    row = AnalystToken.objects.get()
    assert row.study == rated_study and timedelta(days=6) < row.expires_at - timezone.now() <= timedelta(
        days=7
    )
    assert _get(client, reverse("api:study-detail", args=[rated_study.slug]), key).status_code == 200


def test_the_migration_turns_clear_tokens_into_hashed_ones_that_keep_working(client, analyst, rated_study):
    clear = Token.objects.create(user=analyst)
    importlib.import_module("analysis.migrations.0001_analyst_tokens").tokens_hash(apps, None)
    assert not Token.objects.exists()
    assert _get(client, reverse("api:study-detail", args=[rated_study.slug]), clear.key).status_code == 200


def test_the_admin_issues_a_working_token_shown_once(staff_client, django_user_model, rated_study):
    reader = django_user_model.objects.create_user(username="reader")
    answer = staff_client.post(
        reverse("admin:analysis_analysttoken_add"), {"user": reader.pk, "study": rated_study.pk, "days": 3}
    )
    assert answer.status_code == 200 and "no-store" in answer["Cache-Control"]
    key = answer.context["key"]
    row = AnalystToken.objects.get()
    assert key.startswith(row.prefix) and row.study == rated_study and row.user == reader
    assert timedelta(days=2) < row.expires_at - timezone.now() <= timedelta(days=3)
    assert reader.groups.filter(name="Analysts").exists()  # a non-staff reader may read the API
    assert key in answer.content.decode()
    client = Client()
    assert _get(client, reverse("api:study-detail", args=[rated_study.slug]), key).status_code == 200
    # Never shown again: the list and the token's own page show its first characters only.
    for url in (
        reverse("admin:analysis_analysttoken_changelist"),
        reverse("admin:analysis_analysttoken_change", args=[row.pk]),
    ):
        page = staff_client.get(url).content.decode()
        assert row.prefix in page and key not in page


def test_the_stock_tokens_page_is_gone(staff_client):
    assert staff_client.get("/admin/authtoken/tokenproxy/").status_code == 404


def test_a_refused_csv_download_answers_json_not_a_csv(client, rated_study):
    url = reverse("api:study-export", args=[rated_study.slug, "ratings"])
    for accept in ("text/csv", "*/*"):
        answer = client.get(url, HTTP_ACCEPT=accept, HTTP_AUTHORIZATION="Token not-a-token")
        assert answer.status_code == 401 and answer["Content-Type"].startswith("application/json")
        assert answer.json() == {"detail": "Invalid token."}
