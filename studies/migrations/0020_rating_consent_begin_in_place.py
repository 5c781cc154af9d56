"""`rating_consent_begin_in_place`: the consent and the instructions posted together, as one PostgreSQL statement.

With JavaScript the consent page carries the instructions page, and the instructions' button posts both
(`agreed=1`: ratings/shared_pages.py `consent_page`). ratings/answer_path.py took them in two statements: the
consent's UPDATE (`answer_path._consent_sql`), then `rating_items_begin_in_place` (0012). This function makes the
same two moves in one round trip, each exactly as before: the consent taken where the participant is still on
it, active, seen within the study's time limit and within the consent's hold (`p_consent_cutoff`), then the
instructions left for the first item by 0012's function, which answers as it always does (`fallback`, nothing
of its own written, where the participant is not then on the instructions). One statement is one transaction
fewer for each participant's setup.
"""

from django.db import migrations

FUNCTION = r"""
CREATE OR REPLACE FUNCTION rating_consent_begin_in_place(
    p_participant bigint, p_slug text, p_now timestamptz, p_consent_cutoff timestamptz)
RETURNS TABLE (outcome text, study_id bigint, study_title text, study_scale jsonb, scale_question text,
               is_preview boolean, item_id bigint, item_position integer, item_kind text, total integer,
               answered integer, emotion text, situation text, utterance text, response text)
LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
BEGIN
    -- As answer_path._consent_sql: studies.participants.participant_advance from the consent to the
    -- instructions, for a participant whose hold has not lapsed.
    UPDATE studies_participant p SET step = 'instructions', last_seen_at = p_now
      FROM studies_study s
     WHERE p.id = p_participant AND s.id = p.study_id AND s.slug = p_slug AND s.kind = 'rating'
       AND p.status = 'active' AND p.step = 'consent'
       AND p.last_seen_at >= p_now - make_interval(mins => s.time_limit_minutes)
       AND p.last_seen_at >= p_consent_cutoff;
    RETURN QUERY SELECT * FROM rating_items_begin_in_place(p_participant, p_slug, p_now);
END
$fn$;
"""

DROP = "DROP FUNCTION IF EXISTS rating_consent_begin_in_place(bigint, text, timestamptz, timestamptz);"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTION)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("studies", "0019_deal_reads_only_what_it_deals")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
