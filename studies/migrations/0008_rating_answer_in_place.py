"""`rating_answer_in_place`: an in-place answer of the rating kind as one PostgreSQL statement.

The participant's hot path (ratings/answer_path.py) calls it once per answer instead of sending BEGIN, three
statements and COMMIT: one round trip, and plans that PL/pgSQL keeps for the connection's life instead of
planning every statement anew. It stores exactly what `ratings.services.rating_submit` stores and refuses what
it refuses, and the last answer completes the participant as `participant_mark_completed` does; whatever it
does not take — an attention check's answer (which counts failures), a participant who is not active on the
items step or past the time limit — it leaves untouched and answers `fallback`, and the usual Python path
runs instead. Tests compare the two paths row for row (tests/ratings/test_answer_path.py). SQLite (`make run`)
has no such function: there every answer takes the Python path.

Outcomes (`outcome`): `saved` (stored; the row is the next item, marked as shown), `completed` (the last
answer stored and the participant completed with their code; no item), `repeat` (that position was
already answered: nothing written, the row is the current item), `stale` (not the current item: nothing
written, the row is the current item), `not_yours` (no item at that position: 403), `invalid_value` (not on
the study's scale: 400), `fallback` (nothing written). Every outcome but `fallback` before the participant is
found is one row whose item columns are NULL when it shows no item.
"""

from django.db import migrations

FUNCTION = r"""
CREATE OR REPLACE FUNCTION rating_answer_in_place(
    p_participant bigint, p_slug text, p_position integer, p_value integer, p_now timestamptz,
    p_touch interval)
RETURNS TABLE (outcome text, study_id bigint, study_title text, item_id bigint, item_position integer,
               item_kind text, total integer, answered integer, emotion text, situation text,
               utterance text, response text)
LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
DECLARE
    who record;
    mine record;
    shown_id bigint;
    unanswered bigint[];
    n_total integer;
    n_answered integer;
    verdict text;
BEGIN
    -- The participant's row only (OF p): locking the study's row too would serialise the whole study.
    SELECT p.status, p.step, p.last_seen_at, p.flagged_for_exclusion, s.id AS sid, s.kind,
           s.time_limit_minutes, s.scale, s.title, s.completion_code, s.failed_checks_code
      INTO who
      FROM studies_participant p JOIN studies_study s ON s.id = p.study_id
     WHERE p.id = p_participant AND s.slug = p_slug
       FOR UPDATE OF p;
    IF NOT FOUND OR who.kind <> 'rating' OR who.status <> 'active' OR who.step <> 'items'
       OR who.last_seen_at IS NULL
       OR who.last_seen_at < p_now - make_interval(mins => who.time_limit_minutes) THEN
        RETURN QUERY SELECT 'fallback'::text, NULL::bigint, NULL::text, NULL::bigint, NULL::integer,
            NULL::text, NULL::integer, NULL::integer, NULL::text, NULL::text, NULL::text, NULL::text;
        RETURN;
    END IF;

    SELECT a.id, a.kind, a.shown_at,
           EXISTS (SELECT 1 FROM studies_rating r WHERE r.assignment_id = a.id) AS rated
      INTO mine
      FROM studies_assignment a
     WHERE a.participant_id = p_participant AND a.position = p_position;
    -- How many items, how many answered, and the first two unanswered (the current one, the one after it).
    SELECT count(*), count(a.answered_at),
           (array_agg(a.id ORDER BY a.position) FILTER (WHERE a.answered_at IS NULL))[1:2]
      INTO n_total, n_answered, unanswered
      FROM studies_assignment a WHERE a.participant_id = p_participant;
    shown_id := unanswered[1];

    IF mine.id IS NULL THEN
        verdict := 'not_yours';
    ELSIF mine.rated THEN
        verdict := 'repeat';
    ELSIF shown_id IS DISTINCT FROM mine.id THEN
        verdict := 'stale';
    ELSIF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(who.scale) o WHERE (o ->> 'value')::integer = p_value) THEN
        verdict := 'invalid_value';
    ELSIF mine.kind = 'attention' THEN
        verdict := 'fallback';
    ELSIF n_answered + 1 >= n_total THEN
        verdict := 'completed';
    ELSE
        verdict := 'saved';
    END IF;

    IF shown_id IS NULL AND verdict IN ('repeat', 'stale') THEN
        verdict := 'fallback';  -- every item answered, yet still on the items step: the view completes them
    END IF;

    IF verdict IN ('saved', 'completed') THEN
        WITH answer AS (
            INSERT INTO studies_rating (assignment_id, value, response_time_ms, created_at)
            VALUES (mine.id, p_value,
                    CASE WHEN mine.shown_at IS NULL THEN NULL
                         ELSE GREATEST(0, floor(extract(epoch FROM p_now - mine.shown_at) * 1000))::integer END,
                    p_now))
        UPDATE studies_assignment SET answered_at = p_now, shown_at = COALESCE(shown_at, p_now)
         WHERE id = mine.id;
        n_answered := n_answered + 1;
        IF verdict = 'completed' THEN
            -- As studies.participants.participant_mark_completed, with the answer's last_seen_at rule.
            UPDATE studies_participant
               SET status = 'completed', step = 'done', finished_at = p_now,
                   completion_code = CASE WHEN who.flagged_for_exclusion AND who.failed_checks_code <> ''
                                          THEN who.failed_checks_code ELSE who.completion_code END,
                   last_seen_at = CASE WHEN p_now - who.last_seen_at >= p_touch THEN p_now
                                       ELSE who.last_seen_at END
             WHERE id = p_participant;
            shown_id := NULL;
        ELSE
            shown_id := unanswered[2];
            IF p_now - who.last_seen_at >= p_touch THEN
                UPDATE studies_participant SET last_seen_at = p_now WHERE id = p_participant;
            END IF;
        END IF;
    ELSIF verdict IN ('not_yours', 'invalid_value', 'fallback') THEN
        shown_id := NULL;  -- nothing written, no item shown
    END IF;

    -- The item shown next (the current one for a repeat or a stale page; none for the other outcomes), marked
    -- as shown (its first showing counts) in the statement that reads it.
    RETURN QUERY
    WITH shown AS (UPDATE studies_assignment SET shown_at = p_now WHERE id = shown_id AND shown_at IS NULL)
    SELECT verdict, who.sid, who.title::text, a.id, a.position::integer, a.kind::text, n_total, n_answered,
           (CASE WHEN a.kind = 'attention' THEN c.emotion_label ELSE e.name END)::text,
           (CASE WHEN a.kind = 'attention' THEN c.situation ELSE pr.situation END)::text,
           (CASE WHEN a.kind = 'attention' THEN c.speaker_utterance ELSE pr.speaker_utterance END)::text,
           (CASE WHEN a.kind = 'attention' THEN c.response_text ELSE r.text END)::text
      FROM (SELECT 1) one
      LEFT JOIN studies_assignment a ON a.id = shown_id
      LEFT JOIN studies_attentioncheck c ON c.id = a.attention_check_id
      LEFT JOIN studies_response r ON r.id = a.response_id
      LEFT JOIN studies_prompt pr ON pr.id = r.prompt_id
      LEFT JOIN studies_emotion e ON e.id = pr.emotion_id;
END
$fn$;
"""

DROP = "DROP FUNCTION IF EXISTS rating_answer_in_place(bigint, text, integer, integer, timestamptz, interval);"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTION)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("studies", "0007_study_waves")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
