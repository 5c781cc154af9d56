"""An answer that stores a rating is not counted against the participant's rate limit; the rest still are.

Since 0014, `rating_answer_in_place` counted every answer posted with the participant's ticket on the
participant's row, so a saved answer whose touch was not due made an UPDATE of that row for the count alone:
one write per answer at saturation on top of the rating's. A rating can be stored once per item, so the
requests that store one are bounded by the participant's items whatever the limit says; the limit is there for
the requests that store nothing (a repeat, a stale page, someone else's item, a bad value), which are counted as
before. A request that would store a rating is still refused (`limited`, counted) once the window has reached
the limit, so a participant over the limit stores nothing until the next window, as before.

An answer the statement hands on to the usual path (`fallback`: an attention check's, or one left to the view to
complete) is not counted on the row either: the rate limiter counts it there, in Redis, so each request is
counted once, in one place (before, such an answer was counted in both).

It also reads the same rows in two statements fewer: the scale's check with the participant's row, the answered
item in the pass that counts the participant's items (five statements where an answer made seven). The function
is otherwise 0014's, derived from its text by a checked rewrite.
"""

from importlib import import_module

from django.db import migrations

from ._rewrite import rewritten

_previous = import_module("studies.migrations.0014_answer_counts_its_rate_limit")

_STORED = """
    IF verdict IN ('saved', 'completed') THEN
"""
_STORED_UNCOUNTED = """
    IF verdict IN ('saved', 'completed') THEN
        -- Stored, so not counted: the UPDATEs below leave the count as it was, and none is made for it.
        counted := true;
"""

_COUNT = """
    IF NOT counted THEN
"""
_COUNT_UNLESS_HANDED_ON = """
    IF NOT counted AND verdict <> 'fallback' THEN
"""

# Fewer statements for the same reads: the scale's check read with the participant's row, and the answered item
# read in the one pass over the participant's items that counts them.
_WHO = """
           s.completion_code, s.failed_checks_code
      INTO who"""
_WHO_WITH_SCALE_CHECK = """
           s.completion_code, s.failed_checks_code,
           EXISTS (SELECT 1 FROM jsonb_array_elements(s.scale) o WHERE (o ->> 'value')::integer = p_value)
               AS valid_value
      INTO who"""
_ITEMS = """
    SELECT a.id, a.kind, a.shown_at,
           EXISTS (SELECT 1 FROM studies_rating r WHERE r.assignment_id = a.id) AS rated
      INTO mine
      FROM studies_assignment a
     WHERE a.participant_id = p_participant AND a.position = p_position;
    -- How many items, how many answered, and the first two unanswered (the current one, the one after it).
    SELECT count(*), count(a.answered_at),
           (array_agg(a.id ORDER BY a.position) FILTER (WHERE a.answered_at IS NULL))[1:2]
      INTO n_total, n_answered, unanswered
      FROM studies_assignment a WHERE a.participant_id = p_participant;"""
_ITEMS_IN_ONE_PASS = """
    -- The item answered (none: not theirs); how many items, how many answered, and the first two unanswered
    -- (the current one, the one after it).
    SELECT max(a.id) FILTER (WHERE a.position = p_position) AS id,
           max(a.kind) FILTER (WHERE a.position = p_position) AS kind,
           max(a.shown_at) FILTER (WHERE a.position = p_position) AS shown_at,
           bool_or(EXISTS (SELECT 1 FROM studies_rating r WHERE r.assignment_id = a.id))
               FILTER (WHERE a.position = p_position) AS rated,
           count(*)::integer AS n_total, count(a.answered_at)::integer AS n_answered,
           (array_agg(a.id ORDER BY a.position) FILTER (WHERE a.answered_at IS NULL))[1:2] AS unanswered
      INTO mine
      FROM studies_assignment a WHERE a.participant_id = p_participant;
    n_total := mine.n_total;
    n_answered := mine.n_answered;
    unanswered := mine.unanswered;"""
_SCALE = """
    ELSIF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(who.scale) o WHERE (o ->> 'value')::integer = p_value) THEN"""
_SCALE_READ = """
    ELSIF NOT who.valid_value THEN"""

FUNCTION = rewritten(
    _previous.FUNCTION,
    (_STORED, _STORED_UNCOUNTED),
    (_COUNT, _COUNT_UNLESS_HANDED_ON),
    (_WHO, _WHO_WITH_SCALE_CHECK),
    (_ITEMS, _ITEMS_IN_ONE_PASS),
    (_SCALE, _SCALE_READ),
)


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTION)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_previous.FUNCTION)


class Migration(migrations.Migration):
    dependencies = [("studies", "0016_enrolment_counts_completed_by_tally")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
