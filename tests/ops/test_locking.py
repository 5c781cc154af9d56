"""What a launch's concurrency needs from the database's locks, tested with real concurrent transactions."""

import threading

import pytest
from django.db import connection, transaction
from django.test import Client

from kinds.rating.models import Rating
from studies.models import Study

from .flow_helpers import live_study, post_step, to_first_item


@pytest.mark.django_db(transaction=True)
def test_an_answer_is_not_held_up_by_an_arrival_holding_the_study_lock(requires_postgres):
    """Enrollment locks the study's row; answers must lock only their participant's row, or every
    answer of a study queues behind every arrival (and behind every other answer)."""
    study = live_study(slug="locks")
    browser = Client()
    participant, fields = to_first_item(browser, study, "lock00001")
    held, release = threading.Event(), threading.Event()

    def arrival_in_progress() -> None:
        try:
            with transaction.atomic():
                Study.objects.select_for_update().get(pk=study.pk)
                held.set()
                release.wait(15)
        finally:
            connection.close()

    holder = threading.Thread(target=arrival_in_progress)
    holder.start()
    assert held.wait(10)
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '2s'")  # a blocked answer fails fast instead of waiting
    try:
        response = post_step(browser, study, {**fields, "value": "3"})
    finally:
        release.set()
        holder.join()
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
    assert response.status_code == 302
    assert Rating.objects.filter(assignment__participant=participant).count() == 1
