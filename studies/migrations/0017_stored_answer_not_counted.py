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

The function is otherwise 0014's, derived from its text by a checked rewrite.
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

FUNCTION = rewritten(_previous.FUNCTION, (_STORED, _STORED_UNCOUNTED), (_COUNT, _COUNT_UNLESS_HANDED_ON))


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTION)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_previous.FUNCTION)


class Migration(migrations.Migration):
    dependencies = [("studies", "0016_enrolment_counts_completed_by_tally")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
