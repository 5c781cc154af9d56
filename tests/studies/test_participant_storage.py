"""How a participant's row is stored: the updates of their way through the flow (steps, touches) are written
in place on PostgreSQL (HOT), without a new entry in each of the table's indexes (`last_seen_at` has no index)."""

from datetime import timedelta

import pytest
from django.db import connection

from studies.models import Participant
from studies.participants import participant_advance, participant_enroll, participant_touch
from tests.factories import rating_study_build

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="HOT updates are PostgreSQL's")


def _updates() -> tuple[int, int]:
    """The participant table's updates so far, as the statistics system has them: all, and those written in
    place (HOT). This connection's own counts reach it when the connection goes idle after a transaction,
    at most once a second unless forced (as here: forced, idle, then read)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = %s::regclass",
            [Participant._meta.db_table],
        )
        return cursor.fetchone()


@pytest.mark.django_db(transaction=True)
def test_a_participants_steps_and_touches_are_written_in_place():
    with connection.cursor() as cursor:  # earlier tests' deleted rows gone, their room free again
        cursor.execute(f"VACUUM {Participant._meta.db_table}")
    study = rating_study_build(conditions=2, prompts=12, items_per_participant=3)
    # Few enough that each new row version finds room on its page (an update that does not is not HOT either).
    participants = [participant_enroll(study=study, external_id=f"P{i}") for i in range(8)]
    before = _updates()
    for participant in participants:  # each update its own transaction, as in the flow
        assert participant_advance(participant=participant, from_step=Participant.Step.CONSENT)
        later = participant.last_seen_at + timedelta(seconds=30)
        assert participant_touch(participant=participant, now=later).last_seen_at == later
        assert participant_advance(participant=participant, from_step=Participant.Step.INSTRUCTIONS)
    updated, in_place = (after - first for after, first in zip(_updates(), before, strict=True))
    assert updated == 24
    assert in_place == updated, f"{updated - in_place} of {updated} updates wrote new index entries"


@pytest.mark.django_db
def test_no_index_holds_last_seen_at():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexdef LIKE %s",
            [Participant._meta.db_table, "%last_seen_at%"],
        )
        assert cursor.fetchall() == []
