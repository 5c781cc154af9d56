"""Removes what migrations 0008-0021 left in a database that ran them one by one: the SQL functions of the
participant path and their triggers, the two tally tables, and the participant's two request counters. The
participant path is written once, in Python (ratings/services.py, studies/participants.py, studies/balancing.py).

On a database made by the squashed migration none of these exist and nothing happens."""

from django.db import migrations

FUNCTIONS = (
    "rating_answer_begun_in_place",
    "rating_answer_in_place",
    "rating_consent_begin_in_place",
    "rating_enrol_in_place",
    "rating_items_begin_in_place",
    "rating_items_begin_shown_in_place",
    "studies_assignment_tally_added",
    "studies_assignment_tally_removed",
    "studies_participant_completed_tally",
    "studies_response_tally_gone",
    "studies_response_tally_kept",
    "studies_tie_break",
)
TRIGGERS = {
    "studies_assignment": ("studies_assignment_tally_insert", "studies_assignment_tally_delete"),
    "studies_response": (
        "studies_response_tally_insert",
        "studies_response_tally_update",
        "studies_response_tally_delete",
    ),
    "studies_participant": (
        "participant_completed_added",
        "participant_completed_changed",
        "participant_completed_removed",
    ),
}
TABLES = ("studies_responsetally", "studies_conditiontally")
COLUMNS = ("requests_window", "requests_in_window")


def remove_leftovers(apps, schema_editor):
    connection = schema_editor.connection
    postgres = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        for table, triggers in TRIGGERS.items():
            for trigger in triggers:
                cursor.execute(f"DROP TRIGGER IF EXISTS {trigger}" + (f" ON {table}" if postgres else ""))
        if postgres:
            # Every signature each name had (0014 replaced 0008's with one of more arguments).
            cursor.execute(
                "SELECT oid::regprocedure::text FROM pg_proc WHERE proname = ANY(%s)"
                " AND pronamespace = current_schema()::regnamespace",
                [list(FUNCTIONS)],
            )
            for (signature,) in cursor.fetchall():
                cursor.execute(f"DROP FUNCTION IF EXISTS {signature}")
        for table in TABLES:
            cursor.execute(f"DROP TABLE IF EXISTS {table}")
        present = {c.name for c in connection.introspection.get_table_description(cursor, "studies_participant")}
        for column in COLUMNS:
            if column in present:
                cursor.execute(f"ALTER TABLE studies_participant DROP COLUMN {column}")


class Migration(migrations.Migration):
    dependencies = [("studies", "0008_squashed_0021")]

    operations = [migrations.RunPython(remove_leftovers, migrations.RunPython.noop, elidable=True)]
