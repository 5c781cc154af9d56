"""`rating_answer_begun_in_place`: the first answer that comes with the consent and the instructions, as one
PostgreSQL statement.

With JavaScript the consent page carries the instructions page and the participant's first item
(ratings/shared_pages.py `consent_page`): "I agree" shows the instructions and "Continue" the first item, both
without a request, and the first answer posts all three (`agreed=1`, `begun=1` and `shown_ms`, how long the page
showed the item: flow.steps_on_the_way). One request fewer for each participant than when the instructions'
post (0020) fetched the first item.

This function makes the three moves in one round trip, each as its own post makes it:

* the consent (`p_agreed`), as 0020 takes it: a participant still on it, active, seen within the study's time
  limit and within the consent's hold (`p_consent_cutoff`);
* the instructions, by `rating_items_begin_shown_in_place`: 0012's function, which checks and moves as before at
  `p_now`, but marks the first item as shown when the page showed it (`p_shown`) instead of now, so that its
  answer's response time is the time the participant had it on screen;
* the answer, by `rating_answer_in_place` (0008, 0014, 0017), whose outcome is the reply.

Each move is taken only from its own step, so a retry finds the participant on the items and only the answer
runs (as a repeat). `p_shown` is `p_now` less `shown_ms`, no earlier than the participant's enrolment (the Python
path, flow.shown_before, bounds it the same way).
"""

from importlib import import_module

from django.db import migrations

from ._rewrite import rewritten

_begin = import_module("studies.migrations.0012_rating_items_begin_in_place")
_consent = import_module("studies.migrations.0020_rating_consent_begin_in_place")

BEGIN_SHOWN = rewritten(
    _begin.FUNCTION,
    (
        "CREATE OR REPLACE FUNCTION rating_items_begin_in_place(p_participant bigint, p_slug text, p_now timestamptz)",
        "CREATE OR REPLACE FUNCTION rating_items_begin_shown_in_place(\n"
        "    p_participant bigint, p_slug text, p_now timestamptz, p_shown timestamptz)",
    ),
    (
        "WITH shown AS (UPDATE studies_assignment SET shown_at = p_now WHERE id = shown_id AND shown_at IS NULL)",
        "WITH shown AS (UPDATE studies_assignment SET shown_at = p_shown WHERE id = shown_id AND shown_at IS NULL)",
    ),
)

# 0020's consent, its comment and its UPDATE, as that function takes it.
_CONSENT = _consent.FUNCTION[
    _consent.FUNCTION.index("    -- As answer_path._consent_sql") : _consent.FUNCTION.index("    RETURN QUERY")
].rstrip()

FUNCTION = r"""
CREATE OR REPLACE FUNCTION rating_answer_begun_in_place(
    p_participant bigint, p_slug text, p_agreed boolean, p_shown_ms integer, p_consent_cutoff timestamptz,
    p_position integer, p_value integer, p_now timestamptz, p_touch interval, p_window integer, p_limit integer)
RETURNS TABLE (outcome text, study_id bigint, study_title text, item_id bigint, item_position integer,
               item_kind text, total integer, answered integer, emotion text, situation text,
               utterance text, response text)
LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
DECLARE
    shown timestamptz;
BEGIN
    -- When the page showed the first item: shown_ms before now, no earlier than the enrolment.
    SELECT GREATEST(p.started_at, p_now - make_interval(secs => p_shown_ms / 1000.0))
      INTO shown
      FROM studies_participant p WHERE p.id = p_participant;
    IF p_agreed THEN
%(consent)s
    END IF;
    PERFORM 1 FROM rating_items_begin_shown_in_place(p_participant, p_slug, p_now, COALESCE(shown, p_now));
    RETURN QUERY SELECT * FROM rating_answer_in_place(
        p_participant, p_slug, p_position, p_value, p_now, p_touch, p_window, p_limit);
END
$fn$;
""" % {"consent": _CONSENT}

DROP = """
DROP FUNCTION IF EXISTS rating_answer_begun_in_place(
    bigint, text, boolean, integer, timestamptz, integer, integer, timestamptz, interval, integer, integer);
DROP FUNCTION IF EXISTS rating_items_begin_shown_in_place(bigint, text, timestamptz, timestamptz);
"""


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BEGIN_SHOWN)
        schema_editor.execute(FUNCTION)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("studies", "0020_rating_consent_begin_in_place")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
