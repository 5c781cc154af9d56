"""Exports of large studies as files written by a worker (analysis/export_files.py), and streams under ASGI."""

from __future__ import annotations

import csv
import io
import threading
from datetime import timedelta

import pytest
from django.test import AsyncClient
from django.urls import reverse
from django.utils import timezone

from analysis import export_files, exports
from analysis.models import ExportFile, ExportFilePart
from tests.aio import run_async
from tests.concurrency import race

from .builders import build_rating_study, participants_from_counts

pytestmark = pytest.mark.django_db


def _body(response) -> bytes:
    assert response.streaming
    return b"".join(response.streaming_content)


def _streamed(client, study, what="ratings", query="") -> bytes:
    return _body(client.get(reverse("analysis:export", args=[study.slug, what]) + query))


def _written(study, *, what="ratings", no_exclusions=False, pseudonymised=True) -> ExportFile:
    file = export_files.export_file_request(
        study=study, what=what, no_exclusions=no_exclusions, pseudonymised=pseudonymised
    )
    return export_files.export_file_write(file.pk)


def test_a_small_study_streams_and_a_large_one_leads_to_its_file_page(analyst_client, rated_study, settings):
    assert export_files.export_as_file(rated_study) is False
    assert analyst_client.get(reverse("analysis:export", args=[rated_study.slug, "ratings"])).streaming
    settings.EXPORT_FILE_ABOVE_PARTICIPANTS = 5  # rated_study has 20 participants
    assert export_files.export_as_file(rated_study) is True
    response = analyst_client.get(
        reverse("analysis:export", args=[rated_study.slug, "ratings"]) + "?exclusions=none"
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("analysis:export_file", args=[rated_study.slug, "ratings"]) + (
        "?exclusions=none"
    )
    dashboard = analyst_client.get(reverse("analysis:dashboard", args=[rated_study.slug])).content.decode()
    assert reverse("analysis:export_file", args=[rated_study.slug, "participants"]) in dashboard
    assert reverse("analysis:export", args=[rated_study.slug, "participants"]) not in dashboard


@pytest.mark.parametrize("what", ["ratings", "participants", "responses"])
@pytest.mark.parametrize("query", ["", "?exclusions=none"])
def test_the_file_holds_the_bytes_of_the_streamed_export(
    analyst_client, rated_study, monkeypatch, what, query
):
    monkeypatch.setattr(export_files, "PART_BYTES", 3000)  # several parts, read back in order
    streamed = _streamed(analyst_client, rated_study, what, query)
    file = _written(rated_study, what=what, no_exclusions=bool(query))
    assert file.state == ExportFile.State.READY and file.size == len(streamed)
    assert file.rows == len(list(csv.reader(io.StringIO(streamed.decode())))) - 1
    assert file.parts.count() == -(-len(streamed) // 3000)
    response = analyst_client.get(reverse("analysis:export_file_download", args=[rated_study.slug, file.pk]))
    assert response["Content-Length"] == str(len(streamed))
    expected = "no-exclusions" if query else "declared-exclusions"
    assert f'filename="rated-{what}-{expected}.csv"' in response["Content-Disposition"]
    assert _body(response) == streamed


def test_the_page_asks_for_a_file_and_offers_it_once_ready(analyst_client, rated_study, settings):
    settings.EXPORT_FILE_ABOVE_PARTICIPANTS = 5
    settings.CELERY_TASK_ALWAYS_EAGER = False
    page = reverse("analysis:export_file", args=[rated_study.slug, "ratings"])
    html = analyst_client.get(page).content.decode()
    assert "No file of this export yet." in html and "Prepare the file" in html
    sent = []
    with pytest.MonkeyPatch.context() as m:
        m.setattr(export_files, "_dispatch", sent.append)
        response = analyst_client.post(page)
    assert response.status_code == 302 and response["Location"] == page
    file = ExportFile.objects.get()
    html = analyst_client.get(page).content.decode()
    assert "Preparing a new file" in html and 'data-pending="true"' in html and "Prepare the file" not in html
    export_files.export_file_write(file.pk)
    html = analyst_client.get(page).content.decode()
    assert reverse("analysis:export_file_download", args=[rated_study.slug, file.pk]) in html
    assert "200 rows" in html and "Prepare a fresh file" in html


def test_an_unknown_export_has_no_page(analyst_client, rated_study):
    response = analyst_client.get(reverse("analysis:export_file", args=[rated_study.slug, "secrets"]))
    assert response.status_code == 404
    with pytest.raises(exports.ExportError):
        export_files.export_file_request(
            study=rated_study, what="secrets", no_exclusions=False, pseudonymised=True
        )
    assert not ExportFile.objects.exists()


def test_a_file_with_platform_ids_is_not_served_to_who_may_not_see_them(analyst_client, rated_study):
    raw = _written(rated_study, pseudonymised=False)
    url = reverse("analysis:export_file_download", args=[rated_study.slug, raw.pk])
    assert analyst_client.get(url).status_code == 404
    pseudonymised = _written(rated_study)
    url = reverse("analysis:export_file_download", args=[rated_study.slug, pseudonymised.pk])
    assert analyst_client.get(url).status_code == 200


def test_a_failed_write_keeps_no_part_and_says_why(rated_study, monkeypatch):
    def broken(**kwargs):
        yield "rating_id,participant\n"
        raise RuntimeError("the disk is full")

    file = export_files.export_file_request(
        study=rated_study, what="ratings", no_exclusions=False, pseudonymised=True
    )
    monkeypatch.setattr(exports, "export_lines", broken)
    with pytest.raises(RuntimeError):
        export_files.export_file_write(file.pk)
    file.refresh_from_db()
    assert file.state == ExportFile.State.FAILED and file.error == "the disk is full"
    assert not ExportFilePart.objects.exists()
    # A failed file blocks nothing: a new one can be asked for.
    assert (
        export_files.export_file_request(
            study=rated_study, what="ratings", no_exclusions=False, pseudonymised=True
        ).pk
        != file.pk
    )


def test_a_file_left_running_by_a_dead_worker_is_failed_after_the_time_limit(rated_study):
    export = {"study": rated_study, "what": "ratings", "no_exclusions": False, "pseudonymised": True}
    file = export_files.export_file_request(**export)
    assert export_files._claim(file.pk)
    assert export_files.export_file_request(**export).pk == file.pk  # still running: joined
    ExportFile.objects.filter(pk=file.pk).update(
        started_at=timezone.now() - timedelta(seconds=export_files.RUNNING_SECONDS + 1)
    )
    again = export_files.export_file_request(**export)
    assert again.pk != file.pk
    file.refresh_from_db()
    assert file.state == ExportFile.State.FAILED


def test_old_files_are_deleted_when_a_new_one_is_asked_for(rated_study, settings):
    old = _written(rated_study)
    ExportFile.objects.filter(pk=old.pk).update(
        finished_at=timezone.now() - timedelta(days=settings.EXPORT_FILE_KEEP_DAYS, seconds=1)
    )
    _written(rated_study, what="participants")
    assert not ExportFile.objects.filter(pk=old.pk).exists()
    assert not ExportFilePart.objects.filter(file_id=old.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_for_the_same_export_share_one_file_written_once(requires_postgres):
    people = participants_from_counts("human", {1: 30, 2: 50, 3: 20})
    study = build_rating_study(slug="raced", conditions=["human"], participants=people).study
    export = {"what": "ratings", "no_exclusions": False, "pseudonymised": True}

    def ask(i):
        return export_files.export_file_request(study=study, **export).pk

    asked, errors = race(ask, 8)
    assert errors == {} and len(set(asked.values())) == 1
    pk = asked[0]
    written, errors = race(lambda i: export_files.export_file_write(pk) is not None, 4)
    assert errors == {} and sorted(written.values()) == [False, False, False, True]
    file = ExportFile.objects.get()
    assert file.state == ExportFile.State.READY and file.rows == 100
    assert ExportFilePart.objects.filter(file=file).count() == 1


@pytest.mark.django_db(transaction=True)
def test_under_asgi_an_export_is_sent_as_it_is_read_not_read_whole_first(analyst, monkeypatch):
    """Django reads a synchronous stream whole before sending it under ASGI; the exports are asynchronous there,
    each piece read in the request's own thread (where its COPY runs), and the same bytes as under WSGI."""
    from kinds.rating import export_sql

    people = participants_from_counts("human", {1: 30, 2: 50, 3: 20})
    study = build_rating_study(slug="asgi", conditions=["human"], participants=people).study
    monkeypatch.setattr(export_sql, "PIECE_BYTES", 2000)
    url = reverse("analysis:export", args=[study.slug, "ratings"])

    async def download():
        client = AsyncClient()
        await client.aforce_login(analyst)
        response = await client.get(url)
        assert response.is_async
        pieces = [piece async for piece in response.streaming_content]
        return pieces, threading.active_count()

    pieces, _ = run_async(download())
    assert len(pieces) > 5
    from django.test import Client

    client = Client()
    client.force_login(analyst)
    assert b"".join(pieces) == _body(client.get(url))
    assert not [t for t in threading.enumerate() if t.name == "ratings-export-copy"]


def test_a_request_sends_the_workers_task_once_committed(
    rated_study, settings, django_capture_on_commit_callbacks
):
    from celery import current_app

    from analysis.tasks import export_file_task

    settings.CELERY_TASK_ALWAYS_EAGER = False
    sent = []
    with pytest.MonkeyPatch.context() as m:
        m.setattr(current_app, "send_task", lambda name, args: sent.append((name, args)))
        with django_capture_on_commit_callbacks(execute=True):
            file = export_files.export_file_request(
                study=rated_study, what="ratings", no_exclusions=False, pseudonymised=True
            )
            assert sent == []  # not before the file's row is committed
    assert sent == [(export_file_task.name, (file.pk,))]
