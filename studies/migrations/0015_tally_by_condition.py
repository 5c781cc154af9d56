"""A response's tally carries its condition, and enrolment's deal is planned without nested loops.

`rating_enrol_in_place` (0013) deals a newcomer the least assigned of their condition's responses: it reads
every eligible response of the condition with its tally. PL/pgSQL keeps a statement's plan for the
connection's life, and a plan made while the tally's statistics were still an empty table's looked each
response's tally up by its key, one index probe per response (2,000 in the benchmark's study: 3.5-6.8 ms of
the deal against 1.7-2.6 ms hashed). A hash join over the whole tally table, which a later plan chose, reads
every study's responses.

So the tally now carries the response's condition (`condition_id`, set by the triggers that write it and by
`balancing.response_tallies_rebuild`), with an index, and the pages' INSERT is planned with `enable_nestloop`
off (set for that statement alone): the condition's tallies are read through the index and hashed against the
condition's eligible responses, whatever the statistics said when the plan was made. The index holds the
condition only, so a tally's count still changes in place (a HOT update, no index touched). The deal is the
same: the same responses in the same order (tests/studies/test_enrol_statement.py).
"""

from importlib import import_module

import django.db.models.deletion
from django.db import migrations, models

from ._rewrite import rewritten

_tally = import_module("studies.migrations.0010_responsetally")
_enrol = import_module("studies.migrations.0013_rating_enrol_in_place")

FILL = """
UPDATE studies_responsetally SET condition_id = (
    SELECT r.condition_id FROM studies_response r WHERE r.id = studies_responsetally.response_id)
"""

POSTGRESQL_ADDED = f"""
CREATE OR REPLACE FUNCTION studies_assignment_tally_added() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO studies_responsetally AS t (response_id, live_assignments, condition_id)
    SELECT x.id, x.n, (SELECT r.condition_id FROM studies_response r WHERE r.id = x.id)
      FROM ({_tally._CHANGES}) x ORDER BY x.id
    ON CONFLICT (response_id) DO UPDATE SET live_assignments = t.live_assignments + EXCLUDED.live_assignments;
    RETURN NULL;
END
$fn$;
"""

_SQLITE_INSERT = (
    "INSERT OR IGNORE INTO studies_responsetally (response_id, live_assignments) VALUES (NEW.response_id, 0);"
)
SQLITE = [
    rewritten(
        _tally.SQLITE[0],
        (
            _SQLITE_INSERT,
            "INSERT OR IGNORE INTO studies_responsetally (response_id, live_assignments, condition_id)"
            " VALUES (NEW.response_id, 0, (SELECT condition_id FROM studies_response WHERE id = NEW.response_id));",
        ),
    ),
    *_tally.SQLITE[1:],
]

_DEAL = """
    ), picked AS (
        SELECT r.id FROM studies_response r
          LEFT JOIN studies_responsetally t ON t.response_id = r.id
         WHERE r.condition_id = chosen"""
_DEAL_BY_CONDITION = """
    ), picked AS (
        SELECT r.id FROM studies_response r
          LEFT JOIN studies_responsetally t ON t.response_id = r.id AND t.condition_id = chosen
         WHERE r.condition_id = chosen"""
# The pages' INSERT, planned (at its first run, for the connection's life) without nested loops: the condition's
# tallies read through their index and hashed, not looked up one response at a time.
_INSERT = """
    INSERT INTO studies_assignment (participant_id, position, kind, response_id, attention_check_id,"""
_INSERT_HASHED = """
    nestloop := current_setting('enable_nestloop');
    PERFORM set_config('enable_nestloop', 'off', true);
    INSERT INTO studies_assignment (participant_id, position, kind, response_id, attention_check_id,"""
_AFTER = """
    RETURN QUERY SELECT 'enrolled'::text, new_id, chosen;"""
_AFTER_RESET = """
    PERFORM set_config('enable_nestloop', nestloop, true);
    RETURN QUERY SELECT 'enrolled'::text, new_id, chosen;"""
_DECLARE = """
    stale_cutoff timestamptz;"""
_DECLARE_MORE = """
    stale_cutoff timestamptz;
    nestloop text;"""
ENROL = rewritten(
    _enrol.FUNCTION,
    (_DEAL, _DEAL_BY_CONDITION),
    (_INSERT, _INSERT_HASHED),
    (_AFTER, _AFTER_RESET),
    (_DECLARE, _DECLARE_MORE),
)


def sqlite(statements: list[str]):
    """Runs `statements` on SQLite only: its triggers on the pages name the tally's table, which SQLite remakes
    to add a column, so they are dropped around it and created again (0010's going back, this one's going on)."""

    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            for statement in statements:
                schema_editor.execute(statement)

    return run


def create(apps, schema_editor):
    schema_editor.execute(FILL)
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRESQL_ADDED)
        schema_editor.execute(ENROL)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            _tally.POSTGRESQL.split("CREATE OR REPLACE FUNCTION studies_assignment_tally_removed")[0]
        )
        schema_editor.execute(_enrol.FUNCTION)


class Migration(migrations.Migration):
    dependencies = [("studies", "0014_answer_counts_its_rate_limit")]

    operations = [
        migrations.RunPython(sqlite(_tally.SQLITE_DROP), sqlite(_tally.SQLITE), elidable=False),
        migrations.AddField(
            model_name="responsetally",
            name="condition",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="studies.condition",
            ),
        ),
        migrations.RunPython(create, drop, elidable=False),
        migrations.AlterField(
            model_name="responsetally",
            name="condition",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="studies.condition",
            ),
        ),
        migrations.RunPython(sqlite(SQLITE), sqlite(_tally.SQLITE_DROP), elidable=False),
    ]
