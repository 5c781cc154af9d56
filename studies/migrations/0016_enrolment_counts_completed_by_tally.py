"""Enrolment counts a condition's completed participants from a tally, not by reading every one of them.

`rating_enrol_in_place` (0013, 0015) chooses the least filled condition by counting, for each enrolling
condition, its completed and its holding participants. The count read every participant the condition ever had:
in a study of 4,000 participants the choice took 1.6 ms of the statement's 4.0 (0.45 of 2.6 at 1,000), and it
grew with every completion.

Now each condition's completed participants are counted by the database as they complete
(`ConditionTally.completed`: triggers on `studies_participant`, in the transaction that changes a participant's
status, previews left out), and the statement adds to that count only the condition's active participants that
hold a place, found through a partial index of the active ones (`participant_active_cond`). The choice is the
same (tests/studies/test_enrol_statement.py holds it to the Python path, which still counts every participant).

The choice is planned with `enable_seqscan` off for that one statement, as the pages' INSERT is planned with
`enable_nestloop` off (0015): PL/pgSQL keeps the plan for the connection's life, and one made while the table
was empty would read the condition's participants one by one from the start.

PostgreSQL only, as the statement is: on SQLite the tally stays empty and nothing reads it.
"""

from importlib import import_module

import django.db.models.deletion
from django.db import migrations, models

from ._rewrite import rewritten

_previous = import_module("studies.migrations.0015_tally_by_condition")

# A participant counts in their condition's tally while they are completed, not a preview, in a condition.
_COUNTS = "{row}.status = 'completed' AND NOT {row}.is_preview AND {row}.condition_id IS NOT NULL"

TRIGGERS = f"""
CREATE OR REPLACE FUNCTION studies_participant_completed_tally() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP <> 'INSERT' AND {_COUNTS.format(row="OLD")} THEN
        UPDATE studies_conditiontally SET completed = completed - 1 WHERE condition_id = OLD.condition_id;
    END IF;
    IF TG_OP <> 'DELETE' AND {_COUNTS.format(row="NEW")} THEN
        INSERT INTO studies_conditiontally AS t (condition_id, completed) VALUES (NEW.condition_id, 1)
        ON CONFLICT (condition_id) DO UPDATE SET completed = t.completed + 1;
    END IF;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER participant_completed_added AFTER INSERT ON studies_participant
    FOR EACH ROW WHEN (NEW.status = 'completed') EXECUTE FUNCTION studies_participant_completed_tally();
CREATE TRIGGER participant_completed_changed AFTER UPDATE OF status, is_preview, condition_id
    ON studies_participant FOR EACH ROW
    WHEN ((OLD.status = 'completed' OR NEW.status = 'completed')
          AND (OLD.status IS DISTINCT FROM NEW.status OR OLD.is_preview IS DISTINCT FROM NEW.is_preview
               OR OLD.condition_id IS DISTINCT FROM NEW.condition_id))
    EXECUTE FUNCTION studies_participant_completed_tally();
CREATE TRIGGER participant_completed_removed AFTER DELETE ON studies_participant
    FOR EACH ROW WHEN (OLD.status = 'completed') EXECUTE FUNCTION studies_participant_completed_tally();
"""

DROP_TRIGGERS = """
DROP TRIGGER IF EXISTS participant_completed_added ON studies_participant;
DROP TRIGGER IF EXISTS participant_completed_changed ON studies_participant;
DROP TRIGGER IF EXISTS participant_completed_removed ON studies_participant;
DROP FUNCTION IF EXISTS studies_participant_completed_tally();
"""

FILL = f"""
INSERT INTO studies_conditiontally (condition_id, completed)
SELECT p.condition_id, count(*) FROM studies_participant p WHERE {_COUNTS.format(row="p")} GROUP BY p.condition_id
"""  # as balancing.condition_tallies_rebuild fills it (a migration keeps its own text)

_COUNT = """
               (SELECT count(*) FROM studies_participant p
                 WHERE p.condition_id = c.id AND NOT p.is_preview
                   AND (p.status = 'completed'
                        OR (p.status = 'active' AND p.last_seen_at >= stale_cutoff
                            AND (p.step <> 'consent' OR p.last_seen_at >= p_consent_cutoff)))) AS n"""
_COUNT_BY_TALLY = """
               COALESCE((SELECT t.completed FROM studies_conditiontally t WHERE t.condition_id = c.id), 0)
               + (SELECT count(*) FROM studies_participant p
                   WHERE p.condition_id = c.id AND p.status = 'active' AND NOT p.is_preview
                     AND p.last_seen_at >= stale_cutoff
                     AND (p.step <> 'consent' OR p.last_seen_at >= p_consent_cutoff)) AS n"""
_CHOICE = """
    SELECT c.id INTO chosen FROM ("""
_CHOICE_BY_INDEX = """
    PERFORM set_config('enable_seqscan', 'off', true);
    SELECT c.id INTO chosen FROM ("""
_AFTER_CHOICE = """
     LIMIT 1;
    IF chosen IS NULL THEN"""
_AFTER_CHOICE_RESET = """
     LIMIT 1;
    PERFORM set_config('enable_seqscan', seqscan, true);
    IF chosen IS NULL THEN"""
_DECLARE = """
    nestloop text;"""
_DECLARE_MORE = """
    nestloop text;
    seqscan text := current_setting('enable_seqscan');"""

ENROL = rewritten(
    _previous.ENROL,
    (_COUNT, _COUNT_BY_TALLY),
    (_CHOICE, _CHOICE_BY_INDEX),
    (_AFTER_CHOICE, _AFTER_CHOICE_RESET),
    (_DECLARE, _DECLARE_MORE),
)


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TRIGGERS)
        schema_editor.execute(FILL)
        schema_editor.execute(ENROL)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_previous.ENROL)
        schema_editor.execute(DROP_TRIGGERS)


class Migration(migrations.Migration):
    dependencies = [("studies", "0015_tally_by_condition")]

    operations = [
        migrations.CreateModel(
            name="ConditionTally",
            fields=[
                (
                    "condition",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="tally",
                        serialize=False,
                        to="studies.condition",
                    ),
                ),
                ("completed", models.IntegerField(default=0)),
            ],
        ),
        migrations.AddIndex(
            model_name="participant",
            index=models.Index(
                condition=models.Q(("status", "active")), fields=["condition"], name="participant_active_cond"
            ),
        ),
        migrations.RunPython(create, drop, elidable=False),
    ]
