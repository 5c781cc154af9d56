"""The studies app's migrations: a database migrated from 0007 with data ends in the same state as a fresh one,
its data kept, and one that ran the old migrations 0008-0021 one by one has what they left removed."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BEFORE_SQUASH = [("studies", "0007_study_waves")]
SQUASHED = [("studies", "0008_squashed_0021")]


OUR_FUNCTIONS = {
    *(f"studies_flags_{name}()" for name in ("authenticity", "participant", "rating", "study")),
    "studies_flags_stale(bigint[])",
    "studies_status_authenticity()",
    "studies_status_participant()",
}
OUR_TRIGGERS = {
    *(f"studies_{table}_{what}_{op}" for table in ("authenticity", "rating") for what in ("flags", "status")
      for op in ("insert", "update", "delete") if (table, what) != ("rating", "status")),
    *(f"studies_participant_status_{op}" for op in ("insert", "update", "delete")),
    "studies_participant_flags",
    "studies_study_flags",
}  # fmt: skip


def schema() -> dict:
    """Everything the migrations define in this database: each table's columns, every index, and the functions
    and triggers of our own."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns"
            " WHERE table_schema = current_schema() ORDER BY 1, 2"
        )
        columns = cursor.fetchall()
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1"
        )
        indexes = cursor.fetchall()
        cursor.execute(
            "SELECT oid::regprocedure::text FROM pg_proc WHERE pronamespace = current_schema()::regnamespace"
            " ORDER BY 1"
        )
        functions = cursor.fetchall()
        cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1")
        triggers = cursor.fetchall()
    return {"columns": columns, "indexes": indexes, "functions": functions, "triggers": triggers}


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def latest():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_a_database_migrated_from_0007_with_data_ends_as_a_fresh_one_with_its_data(requires_postgres):
    fresh = schema()
    # The only functions and triggers are those that keep the live status page's flags and counts (migrations
    # 0018 and 0019): nothing else of the old migrations' survives.
    assert {name for (name,) in fresh["functions"]} == OUR_FUNCTIONS
    assert {name for (name,) in fresh["triggers"]} == OUR_TRIGGERS
    old = migrate(BEFORE_SQUASH)
    study = old.get_model("studies", "Study").objects.create(slug="kept", title="Kept", kind="rating")
    condition = old.get_model("studies", "Condition").objects.create(study=study, name="human", kind="human")
    emotion = old.get_model("studies", "Emotion").objects.first()
    prompt = old.get_model("studies", "Prompt").objects.create(
        study=study, emotion=emotion, dialogue_id="c1", situation="s", speaker_utterance="u"
    )
    response = old.get_model("studies", "Response").objects.create(
        prompt=prompt, condition=condition, text="r"
    )
    participant = old.get_model("studies", "Participant").objects.create(
        study=study, condition=condition, external_id="P1", seed=1
    )
    page = old.get_model("studies", "Assignment").objects.create(
        participant=participant, position=0, kind="response", response=response
    )
    old.get_model("studies", "Rating").objects.create(assignment=page, value=3)

    new = migrate(latest())

    assert schema() == fresh
    rating = new.get_model("rating", "Rating").objects.get()
    assert (rating.value, rating.assignment.participant.external_id, rating.assignment.response.text) == (
        3,
        "P1",
        "r",
    )


def test_what_the_old_migrations_left_is_removed(requires_postgres):
    """As a database that ran 0008-0021 one by one has them: their functions and triggers, the tallies, the
    participant's request counters. Migration 0009 removes them all."""
    fresh = schema()
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION rating_answer_in_place(bigint, text) RETURNS integer LANGUAGE sql AS 'SELECT 1';"
            "CREATE FUNCTION rating_answer_in_place(bigint, text, integer) RETURNS integer LANGUAGE sql"
            " AS 'SELECT 1';"
            "CREATE FUNCTION studies_assignment_tally_added() RETURNS trigger LANGUAGE plpgsql"
            " AS 'BEGIN RETURN NULL; END';"
            "CREATE TRIGGER studies_assignment_tally_insert AFTER INSERT ON studies_assignment"
            " FOR EACH STATEMENT EXECUTE FUNCTION studies_assignment_tally_added();"
            "CREATE TABLE studies_responsetally (response_id bigint PRIMARY KEY, live_assignments integer);"
            "CREATE TABLE studies_conditiontally (condition_id bigint PRIMARY KEY, completed integer);"
            "ALTER TABLE studies_participant ADD COLUMN requests_window integer NOT NULL DEFAULT 0;"
            "ALTER TABLE studies_participant ADD COLUMN requests_in_window integer NOT NULL DEFAULT 0;"
        )
    assert schema() != fresh
    migrate(SQUASHED)  # 0009 undone (it undoes nothing)...
    migrate(latest())  # ...and run again, as on a database that had the old migrations

    assert schema() == fresh
