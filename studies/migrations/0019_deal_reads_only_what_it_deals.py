"""Enrolment's deal reads as many tallies as it deals, whatever the size of the condition.

Since 0018 the deal read a condition's eligible tallies in order of their count and ordered the group with the
lowest count by the participant's hash. In a balanced study every count is one of two values, so that group is
on average half the condition (1,000 of 2,000 responses in the benchmark's study), and with the statistics of
a busy table the planner sorted the whole condition instead: 1.2-1.9 ms of PostgreSQL per enrolment, held
under the study's lock, growing with the corpus (~10x for 20,000 responses a condition).

Now each count has its own fixed order of the responses: a hash of the response id and the count
(`studies_tie_break(response_id, live_assignments, 1540483477)`, in the tally's index
`responsetally_deal_order` after the condition, the eligibility and the count). A participant draws a starting
point in that order (`studies_tie_break(0, draw, draw)`, from the same two draws the deal used before) and is
dealt the responses of the lowest count from that point on, wrapping around at the end, then those of the next
count in the same way, until they have as many as the study shows. Each count takes an index range scan from
the starting point on, and a second from its beginning only if the first ran out; each stops after the rows it
needs: about as many index entries as items, not a group of 1,000.

What a participant gets is still the least assigned responses, so the balance is exactly as before; which of
the tied ones is a run in a random order that changes with every count, starting at a random point, instead of
an independent shuffle per participant (docs/participants.md, "Assignment rules"). The Python path
(studies/kinds/rating.py, `_pages_sql`) orders the responses the same way, and
tests/studies/test_enrol_statement.py holds the two to the same rows.

The index replaces `responsetally_deal` (its first three columns), so a tally's change still writes one entry.
PostgreSQL only, as the statement is: on SQLite nothing reads the tallies in order (the Python path looks each
one up by its response), so the model's index goes there too.
"""

from importlib import import_module

from django.db import migrations

from ._rewrite import rewritten

_previous = import_module("studies.migrations.0018_deal_reads_the_tally_alone")

# The second number of every count's order: fixed, any odd 31-bit value (studies.balancing.DEAL_ORDER_SALT).
SALT = 1540483477

INDEX = f"""
CREATE INDEX IF NOT EXISTS responsetally_deal_order ON studies_responsetally
    (condition_id, eligible, live_assignments, studies_tie_break(response_id, live_assignments, {SALT}),
     response_id)
"""
INDEX_DROP = "DROP INDEX IF EXISTS responsetally_deal_order"

_PICKED_DEALT = """
    ), picked AS (
        SELECT u.id FROM unnest(dealt) WITH ORDINALITY AS u(id, i) ORDER BY u.i"""

# Before the pages' INSERT (planned, as it, without sequential or bitmap scans): the responses dealt, count by
# count from the lowest, each count's from the participant's starting point on and then from its beginning.
_INSERT = """
    PERFORM set_config('enable_bitmapscan', 'off', true);
    INSERT INTO studies_assignment"""
_DEAL_THEN_INSERT = f"""
    PERFORM set_config('enable_bitmapscan', 'off', true);
    deal_start := studies_tie_break(0, p_draws[3], p_draws[4]);
    SELECT t.live_assignments INTO lvl FROM studies_responsetally t
     WHERE t.condition_id = chosen AND t.eligible ORDER BY t.live_assignments LIMIT 1;
    WHILE lvl IS NOT NULL LOOP
        need_n := st.items_per_participant - cardinality(dealt);
        dealt := dealt || ARRAY(
            SELECT t.response_id FROM studies_responsetally t
             WHERE t.condition_id = chosen AND t.eligible AND t.live_assignments = lvl
               AND studies_tie_break(t.response_id, t.live_assignments, {SALT}) >= deal_start
             ORDER BY studies_tie_break(t.response_id, t.live_assignments, {SALT}), t.response_id
             LIMIT need_n);
        EXIT WHEN cardinality(dealt) >= st.items_per_participant;
        -- The rest of this count, from the beginning of its order (wrapped around).
        need_n := st.items_per_participant - cardinality(dealt);
        dealt := dealt || ARRAY(
            SELECT t.response_id FROM studies_responsetally t
             WHERE t.condition_id = chosen AND t.eligible AND t.live_assignments = lvl
               AND studies_tie_break(t.response_id, t.live_assignments, {SALT}) < deal_start
             ORDER BY studies_tie_break(t.response_id, t.live_assignments, {SALT}), t.response_id
             LIMIT need_n);
        EXIT WHEN cardinality(dealt) >= st.items_per_participant;
        -- The next count (at the end of a round, or past responses added since): the index's next entry.
        SELECT t.live_assignments INTO lvl FROM studies_responsetally t
         WHERE t.condition_id = chosen AND t.eligible AND t.live_assignments > lvl
         ORDER BY t.live_assignments LIMIT 1;
    END LOOP;
    IF cardinality(dealt) < st.items_per_participant THEN
        -- Fewer than the study shows: a condition that small, or a release that lowered a count between two of
        -- the reads above (each sees the database as it is then). The same deal again in one statement, which
        -- sees one state of every tally (and reads the whole condition: rare).
        dealt := ARRAY(
            SELECT t.response_id FROM studies_responsetally t
             WHERE t.condition_id = chosen AND t.eligible
             ORDER BY t.live_assignments,
                      studies_tie_break(t.response_id, t.live_assignments, {SALT}) < deal_start,
                      studies_tie_break(t.response_id, t.live_assignments, {SALT}), t.response_id
             LIMIT st.items_per_participant);
    END IF;
    INSERT INTO studies_assignment"""
_DECLARE = """
    bitmapscan text;"""
_DECLARE_MORE = """
    bitmapscan text;
    deal_start bigint;
    lvl integer;
    need_n integer;
    dealt bigint[] := '{}';"""

# The conditions' counts computed once each: without the fence the planner inlined the subquery and counted each
# condition's holding participants twice, once for the quota's test and once for the order.
_CHOICE = """
                        WHERE r.condition_id = c.id AND r.sample_index = 0 AND r.review <> 'flagged')
    ) c
     WHERE c.n < c.quota"""
_CHOICE_COUNTED_ONCE = """
                        WHERE r.condition_id = c.id AND r.sample_index = 0 AND r.review <> 'flagged')
        OFFSET 0
    ) c
     WHERE c.n < c.quota"""

ENROL = rewritten(
    _previous.ENROL,
    (_CHOICE, _CHOICE_COUNTED_ONCE),
    (_previous._PICKED_FROM_TALLY, _PICKED_DEALT),
    (_INSERT, _DEAL_THEN_INSERT),
    (_DECLARE, _DECLARE_MORE),
)


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(INDEX)
        schema_editor.execute(ENROL)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_previous.ENROL)
        schema_editor.execute(INDEX_DROP)


class Migration(migrations.Migration):
    dependencies = [("studies", "0018_deal_reads_the_tally_alone")]

    operations = [
        migrations.RunPython(create, drop, elidable=False),
        migrations.RemoveIndex(model_name="responsetally", name="responsetally_deal"),
    ]
