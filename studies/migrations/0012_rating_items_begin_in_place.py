"""`rating_items_begin_in_place`: a rating study's instructions left for the first item, as one PostgreSQL
statement.

The instructions posted in the background (ratings/answer_path.py) take the participant to the items: the
step moved as `studies.participants.participant_advance` moves it (a conditional change naming the status and
the step it expects, `last_seen_at` written), and the first item read and marked as shown as
`ratings.services.item_show` does, in one round trip instead of four statements. Whatever it does not take —
a study that asks the TEQ next, a participant not active on the instructions, past the time limit, or with
nothing left to show — it leaves untouched and answers `fallback`, and the usual Python path runs instead
(tests/ratings/test_items_begin.py compares the two). SQLite has no such function: there the Python path
always runs.

Outcomes (`outcome`): `begun` (the step is now `items`; the row is the first item, marked as shown, with what
the item page needs of the study), `fallback` (nothing written; every other column NULL).
"""

from django.db import migrations

FUNCTION = r"""
CREATE OR REPLACE FUNCTION rating_items_begin_in_place(p_participant bigint, p_slug text, p_now timestamptz)
RETURNS TABLE (outcome text, study_id bigint, study_title text, study_scale jsonb, scale_question text,
               is_preview boolean, item_id bigint, item_position integer, item_kind text, total integer,
               answered integer, emotion text, situation text, utterance text, response text)
LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
DECLARE
    who record;
    shown_id bigint;
    n_total integer;
    n_answered integer;
BEGIN
    -- The participant's row only (OF p), as the answer's statement locks it.
    SELECT p.status, p.step, p.last_seen_at, p.is_preview, s.id AS sid, s.kind, s.ask_teq,
           s.time_limit_minutes, s.scale, s.scale_question, s.title
      INTO who
      FROM studies_participant p JOIN studies_study s ON s.id = p.study_id
     WHERE p.id = p_participant AND s.slug = p_slug
       FOR UPDATE OF p;
    IF FOUND AND who.kind = 'rating' AND NOT who.ask_teq AND who.status = 'active'
       AND who.step = 'instructions' AND who.last_seen_at IS NOT NULL
       AND who.last_seen_at >= p_now - make_interval(mins => who.time_limit_minutes) THEN
        SELECT count(*), count(a.answered_at),
               (array_agg(a.id ORDER BY a.position) FILTER (WHERE a.answered_at IS NULL))[1]
          INTO n_total, n_answered, shown_id
          FROM studies_assignment a WHERE a.participant_id = p_participant;
    END IF;
    IF shown_id IS NULL THEN
        RETURN QUERY SELECT 'fallback'::text, NULL::bigint, NULL::text, NULL::jsonb, NULL::text,
            NULL::boolean, NULL::bigint, NULL::integer, NULL::text, NULL::integer, NULL::integer, NULL::text,
            NULL::text, NULL::text, NULL::text;
        RETURN;
    END IF;

    UPDATE studies_participant SET step = 'items', last_seen_at = p_now WHERE id = p_participant;

    RETURN QUERY
    WITH shown AS (UPDATE studies_assignment SET shown_at = p_now WHERE id = shown_id AND shown_at IS NULL)
    SELECT 'begun'::text, who.sid, who.title::text, who.scale, who.scale_question::text, who.is_preview,
           a.id, a.position::integer, a.kind::text, n_total, n_answered,
           (CASE WHEN a.kind = 'attention' THEN c.emotion_label ELSE e.name END)::text,
           (CASE WHEN a.kind = 'attention' THEN c.situation ELSE pr.situation END)::text,
           (CASE WHEN a.kind = 'attention' THEN c.speaker_utterance ELSE pr.speaker_utterance END)::text,
           (CASE WHEN a.kind = 'attention' THEN c.response_text ELSE r.text END)::text
      FROM studies_assignment a
      LEFT JOIN studies_attentioncheck c ON c.id = a.attention_check_id
      LEFT JOIN studies_response r ON r.id = a.response_id
      LEFT JOIN studies_prompt pr ON pr.id = r.prompt_id
      LEFT JOIN studies_emotion e ON e.id = pr.emotion_id
     WHERE a.id = shown_id;
END
$fn$;
"""

DROP = "DROP FUNCTION IF EXISTS rating_items_begin_in_place(bigint, text, timestamptz);"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTION)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("studies", "0011_participant_hot_updates")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
