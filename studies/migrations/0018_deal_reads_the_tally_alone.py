"""Every response has a tally, which says whether it can be dealt; enrolment's deal reads the tally alone.

`rating_enrol_in_place` (0013, 0015) dealt a newcomer the least assigned of their condition's eligible
responses by reading every one of them with its tally (2,000 a condition in the benchmark's study: 6,000
buffers and a sort of all of them, 1.2-1.4 ms of the enrolment's 2 ms of PostgreSQL), because a response never
dealt had no tally and so had to be found among the responses.

Now every response has a `ResponseTally` row from the moment it exists, with `eligible` (sample 0 and not
flagged: the responses a participant may be shown) kept in step with the response by triggers on
`studies_response` (a response inserted, its review, sample or condition changed, the response deleted), on
PostgreSQL and SQLite alike. The tallies have an index by condition, eligibility and count
(`responsetally_deal`, which replaces the index of the condition alone), and the deal reads the condition's
eligible tallies through it in order of their count: the database reads the group with the lowest count (and
the next ones while it has fewer responses than the study shows), orders that group by the participant's
hash, and stops. With 2,000 responses a condition it reads one group instead of 2,000 rows.

The choice is the same as before: the same eligible responses of the condition, each with the same count
(a response never dealt: 0), in the same order (the count, the hash of the participant's draws, the id). The
Python path still reads the responses with their tallies (studies/kinds/rating.py, `_pages_sql`), and
tests/studies/test_enrol_statement.py holds the two to the same rows.

The pages' INSERT is planned without sequential or bitmap scans (set for that statement alone, as nested loops
are since 0015): PL/pgSQL keeps the plan for the connection's life, and with the statistics of a tally just
after a round of deals the planner chose a sequential scan of every study's tallies with a sort.

A tally's count is now in an index, so its change is no longer a HOT update: each page added or removed writes
an index entry. The deal's saving is many times that (docs/participants.md, "Assignment rules").

On PostgreSQL the response triggers run once per statement and write the tallies in response id order, as the
page triggers do (0010), so a review of many responses at once and an enrolment wait for each other instead of
deadlocking. The page trigger still inserts a tally it does not find (after something bypassed the triggers),
now with the response's eligibility; `manage.py tallies_rebuild` fills a row for every response.

On SQLite (`make run`) per-row triggers do the same. SQLite drops a table's triggers when Django remakes the
table, so a later migration that alters `studies_response` there must create these again.
"""

from importlib import import_module

from django.db import migrations, models

from ._rewrite import rewritten

_tally = import_module("studies.migrations.0010_responsetally")
_by_condition = import_module("studies.migrations.0015_tally_by_condition")
_previous = import_module("studies.migrations.0016_enrolment_counts_completed_by_tally")

# Whether the response row `r` may be dealt: `eligible_responses` (studies/kinds/rating.py).
_ELIGIBLE = "({r}.sample_index = 0 AND {r}.review <> 'flagged')"

# Both databases: the existing tallies told their response's eligibility (and condition), and every response
# without one given one, at 0 (a response without a tally has no page).
FILL = [
    f"""UPDATE studies_responsetally SET
        eligible = (SELECT {_ELIGIBLE.format(r="r")} FROM studies_response r
                     WHERE r.id = studies_responsetally.response_id),
        condition_id = (SELECT r.condition_id FROM studies_response r
                         WHERE r.id = studies_responsetally.response_id)""",
    f"""INSERT INTO studies_responsetally (response_id, live_assignments, condition_id, eligible)
    SELECT r.id, 0, r.condition_id, {_ELIGIBLE.format(r="r")} FROM studies_response r
     WHERE NOT EXISTS (SELECT 1 FROM studies_responsetally t WHERE t.response_id = r.id)""",
]

# A statement's pages added: the response's condition and eligibility read by one look-up per response (a
# correlated subquery, as before: this runs inside the deal's INSERT, planned without nested loops, where a
# join would hash the whole response table), used only when the tally is missing.
POSTGRESQL_ADDED = f"""
CREATE OR REPLACE FUNCTION studies_assignment_tally_added() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO studies_responsetally AS t (response_id, live_assignments, condition_id, eligible)
    SELECT x.id, x.n, (x.r).condition_id, {_ELIGIBLE.format(r="(x.r)")}
      FROM (SELECT x.id, x.n, (SELECT r FROM studies_response r WHERE r.id = x.id) AS r
              FROM ({_tally._CHANGES}) x OFFSET 0) x
     ORDER BY x.id
    ON CONFLICT (response_id) DO UPDATE SET live_assignments = t.live_assignments + EXCLUDED.live_assignments;
    RETURN NULL;
END
$fn$;
"""

# A statement's responses inserted or changed (`changed`) or deleted (`gone`). An UPDATE writes only the
# tallies that differ (an edit of a response's text locks none), in response id order.
POSTGRESQL_RESPONSES = f"""
CREATE OR REPLACE FUNCTION studies_response_tally_kept() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO studies_responsetally AS t (response_id, live_assignments, condition_id, eligible)
    SELECT c.id, 0, c.condition_id, {_ELIGIBLE.format(r="c")} FROM changed c
     WHERE TG_OP = 'INSERT'
        OR NOT EXISTS (SELECT 1 FROM studies_responsetally k
                        WHERE k.response_id = c.id AND k.condition_id = c.condition_id
                          AND k.eligible = {_ELIGIBLE.format(r="c")})
     ORDER BY c.id
    ON CONFLICT (response_id) DO UPDATE SET condition_id = EXCLUDED.condition_id, eligible = EXCLUDED.eligible;
    RETURN NULL;
END
$fn$;
CREATE OR REPLACE FUNCTION studies_response_tally_gone() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM 1 FROM studies_responsetally t WHERE t.response_id IN (SELECT g.id FROM gone g)
      ORDER BY t.response_id FOR UPDATE;
    DELETE FROM studies_responsetally t WHERE t.response_id IN (SELECT g.id FROM gone g);
    RETURN NULL;
END
$fn$;
CREATE TRIGGER studies_response_tally_insert AFTER INSERT ON studies_response
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION studies_response_tally_kept();
CREATE TRIGGER studies_response_tally_update AFTER UPDATE ON studies_response
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION studies_response_tally_kept();
CREATE TRIGGER studies_response_tally_delete AFTER DELETE ON studies_response
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION studies_response_tally_gone();
"""

POSTGRESQL_RESPONSES_DROP = """
DROP TRIGGER IF EXISTS studies_response_tally_insert ON studies_response;
DROP TRIGGER IF EXISTS studies_response_tally_update ON studies_response;
DROP TRIGGER IF EXISTS studies_response_tally_delete ON studies_response;
DROP FUNCTION IF EXISTS studies_response_tally_kept();
DROP FUNCTION IF EXISTS studies_response_tally_gone();
"""

_SQLITE_VALUES = "VALUES ({id}, 0, {r}.condition_id, {eligible})"
_SQLITE_KEEP = (
    "INSERT OR IGNORE INTO studies_responsetally (response_id, live_assignments, condition_id, eligible) "
    + _SQLITE_VALUES.format(id="NEW.id", r="NEW", eligible=_ELIGIBLE.format(r="NEW"))
    + ";"
)
SQLITE_RESPONSES = [
    f"""CREATE TRIGGER studies_response_tally_insert AFTER INSERT ON studies_response
    BEGIN
        {_SQLITE_KEEP}
    END;""",
    f"""CREATE TRIGGER studies_response_tally_update AFTER UPDATE OF review, sample_index, condition_id
    ON studies_response
    BEGIN
        {_SQLITE_KEEP}
        UPDATE studies_responsetally SET condition_id = NEW.condition_id, eligible = {_ELIGIBLE.format(r="NEW")}
         WHERE response_id = NEW.id;
    END;""",
    """CREATE TRIGGER studies_response_tally_delete AFTER DELETE ON studies_response
    BEGIN
        DELETE FROM studies_responsetally WHERE response_id = OLD.id;
    END;""",
]
SQLITE_RESPONSES_DROP = [
    "DROP TRIGGER IF EXISTS studies_response_tally_insert;",
    "DROP TRIGGER IF EXISTS studies_response_tally_update;",
    "DROP TRIGGER IF EXISTS studies_response_tally_delete;",
]
# The page trigger's insert of a missing tally, with the response's eligibility.
SQLITE_PAGES = [
    rewritten(
        _by_condition.SQLITE[0],
        (
            "VALUES (NEW.response_id, 0, (SELECT condition_id FROM studies_response WHERE id = NEW.response_id));",
            "VALUES (NEW.response_id, 0, (SELECT condition_id FROM studies_response WHERE id = NEW.response_id),"
            f" (SELECT {_ELIGIBLE.format(r='r')} FROM studies_response r WHERE r.id = NEW.response_id));",
        ),
        (
            "(response_id, live_assignments, condition_id)",
            "(response_id, live_assignments, condition_id, eligible)",
        ),
    ),
    *_by_condition.SQLITE[1:],
]

# The deal: the condition's eligible tallies alone, through `responsetally_deal`, in the same order as before.
_PICKED = """
    ), picked AS (
        SELECT r.id FROM studies_response r
          LEFT JOIN studies_responsetally t ON t.response_id = r.id AND t.condition_id = chosen
         WHERE r.condition_id = chosen AND r.sample_index = 0 AND r.review <> 'flagged'
         ORDER BY COALESCE(t.live_assignments, 0), studies_tie_break(r.id, p_draws[3], p_draws[4]), r.id
         LIMIT st.items_per_participant"""
_PICKED_FROM_TALLY = """
    ), picked AS (
        SELECT t.response_id AS id FROM studies_responsetally t
         WHERE t.condition_id = chosen AND t.eligible
         ORDER BY t.live_assignments, studies_tie_break(t.response_id, p_draws[3], p_draws[4]), t.response_id
         LIMIT st.items_per_participant"""

# The pages' INSERT planned (at its first run, for the connection's life) without sequential or bitmap scans, as
# it is without nested loops (0015): the planner is left the index scan in order of the count, which reads the
# lowest group and stops, or a full sort of the condition's tallies, which it costs dearer. With the statistics
# of a table just after a round of deals (few distinct counts, each shared by many responses), it chose a
# sequential scan of every study's tallies with a sort (0.58 ms at 6,000 tallies, growing with every study).
_INSERT = """
    PERFORM set_config('enable_nestloop', 'off', true);
    INSERT INTO studies_assignment"""
_INSERT_BY_INDEX = """
    PERFORM set_config('enable_nestloop', 'off', true);
    bitmapscan := current_setting('enable_bitmapscan');
    PERFORM set_config('enable_seqscan', 'off', true);
    PERFORM set_config('enable_bitmapscan', 'off', true);
    INSERT INTO studies_assignment"""
_AFTER = """
    PERFORM set_config('enable_nestloop', nestloop, true);"""
_AFTER_RESET = """
    PERFORM set_config('enable_nestloop', nestloop, true);
    PERFORM set_config('enable_seqscan', seqscan, true);
    PERFORM set_config('enable_bitmapscan', bitmapscan, true);"""
_DECLARE = """
    seqscan text := current_setting('enable_seqscan');"""
_DECLARE_MORE = """
    seqscan text := current_setting('enable_seqscan');
    bitmapscan text;"""

ENROL = rewritten(
    _previous.ENROL,
    (_PICKED, _PICKED_FROM_TALLY),
    (_INSERT, _INSERT_BY_INDEX),
    (_AFTER, _AFTER_RESET),
    (_DECLARE, _DECLARE_MORE),
)


# Runs statements on SQLite only: the triggers that name the tally's table are dropped while Django remakes it
# there, as in 0015.
sqlite = _by_condition.sqlite


def create(apps, schema_editor):
    for statement in FILL:
        schema_editor.execute(statement)
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRESQL_ADDED)
        schema_editor.execute(POSTGRESQL_RESPONSES)
        schema_editor.execute(ENROL)
    else:
        for statement in [*SQLITE_RESPONSES, *SQLITE_PAGES]:
            schema_editor.execute(statement)


def drop(apps, schema_editor):
    """Back to 0017: its deal, its page trigger; the tallies at 0 stay (they are what 0017's triggers leave
    after a release, and 0017's deal reads no tally as 0)."""
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_previous.ENROL)
        schema_editor.execute(POSTGRESQL_RESPONSES_DROP)
        schema_editor.execute(_by_condition.POSTGRESQL_ADDED)
    else:
        for statement in [*SQLITE_RESPONSES_DROP, *_tally.SQLITE_DROP]:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("studies", "0017_stored_answer_not_counted")]

    operations = [
        migrations.RunPython(sqlite(_tally.SQLITE_DROP), sqlite(_by_condition.SQLITE), elidable=False),
        migrations.AddField(
            model_name="responsetally",
            name="eligible",
            field=models.BooleanField(default=False),
        ),
        migrations.AlterField(
            model_name="responsetally",
            name="condition",
            field=models.ForeignKey(
                db_index=False,
                on_delete=models.deletion.CASCADE,
                related_name="+",
                to="studies.condition",
            ),
        ),
        migrations.AddIndex(
            model_name="responsetally",
            index=models.Index(
                fields=["condition", "eligible", "live_assignments"], name="responsetally_deal"
            ),
        ),
        migrations.RunPython(create, drop, elidable=False),
    ]
