"""The in-place answer counts the participant's rate limit in its own statement, not in a round trip to Redis.

An answer posted in the background with the participant's ticket (ratings/tickets.py) is not counted in Redis
by the rate limiter: `rating_answer_in_place` counts it on the participant's row, which it locks anyway, in the
limiter's fixed windows (`config.ratelimit.current_window`), and refuses it (`limited`, nothing else written)
beyond `p_limit` requests in the window. `p_limit` NULL (no ticket, or rate limits off) counts nothing there:
the limiter has counted the request in Redis as before.

Otherwise the function is 0008's: it stores exactly what `ratings.services.rating_submit` stores and refuses what
it refuses (tests/ratings/test_answer_path.py). The count is written in the UPDATE of the participant's row that
the answer makes anyway where it makes one (the touch, the completion), so an answer still updates that row once.
"""

from importlib import import_module

from django.db import migrations, models

FUNCTION = r"""
CREATE OR REPLACE FUNCTION rating_answer_in_place(
    p_participant bigint, p_slug text, p_position integer, p_value integer, p_now timestamptz,
    p_touch interval, p_window integer, p_limit integer)
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
    n_requests integer;
    counted boolean := p_limit IS NULL;  -- whether this request's count is written (or not to be written)
    verdict text;
BEGIN
    -- The participant's row only (OF p): locking the study's row too would serialise the whole study.
    SELECT p.status, p.step, p.last_seen_at, p.flagged_for_exclusion, p.requests_window,
           p.requests_in_window, s.id AS sid, s.kind, s.time_limit_minutes, s.scale, s.title,
           s.completion_code, s.failed_checks_code
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

    -- This request counted in the window, as the limiter counts it: over the limit, nothing else is done.
    n_requests := CASE WHEN who.requests_window = p_window THEN who.requests_in_window + 1 ELSE 1 END;
    IF n_requests > p_limit THEN
        UPDATE studies_participant SET requests_window = p_window, requests_in_window = n_requests
         WHERE id = p_participant;
        RETURN QUERY SELECT 'limited'::text, NULL::bigint, NULL::text, NULL::bigint, NULL::integer,
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
                                       ELSE who.last_seen_at END,
                   requests_window = CASE WHEN counted THEN requests_window ELSE p_window END,
                   requests_in_window = CASE WHEN counted THEN requests_in_window ELSE n_requests END
             WHERE id = p_participant;
            counted := true;
            shown_id := NULL;
        ELSE
            shown_id := unanswered[2];
            IF p_now - who.last_seen_at >= p_touch THEN
                UPDATE studies_participant
                   SET last_seen_at = p_now,
                       requests_window = CASE WHEN counted THEN requests_window ELSE p_window END,
                       requests_in_window = CASE WHEN counted THEN requests_in_window ELSE n_requests END
                 WHERE id = p_participant;
                counted := true;
            END IF;
        END IF;
    ELSIF verdict IN ('not_yours', 'invalid_value', 'fallback') THEN
        shown_id := NULL;  -- nothing written, no item shown
    END IF;
    IF NOT counted THEN
        UPDATE studies_participant SET requests_window = p_window, requests_in_window = n_requests
         WHERE id = p_participant;
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

DROP = (
    "DROP FUNCTION IF EXISTS rating_answer_in_place("
    "bigint, text, integer, integer, timestamptz, interval, integer, integer);"
)


def _previous():
    return import_module("studies.migrations.0008_rating_answer_in_place")


def _tally_triggers(on: bool):
    """SQLite adds a NOT NULL column by remaking the participants' table, which its triggers on the pages
    (studies/migrations/0010) name: they are dropped around it and created again, as 0010 creates them."""
    tally = import_module("studies.migrations.0010_responsetally")

    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            for statement in tally.SQLITE if on else tally.SQLITE_DROP:
                schema_editor.execute(statement)

    return run


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_previous().DROP)
        schema_editor.execute(FUNCTION)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)
        schema_editor.execute(_previous().FUNCTION)


class Migration(migrations.Migration):
    dependencies = [("studies", "0013_rating_enrol_in_place")]

    operations = [
        migrations.RunPython(_tally_triggers(on=False), _tally_triggers(on=True), elidable=False),
        migrations.AddField(
            model_name="participant",
            name="requests_window",
            field=models.IntegerField(db_default=0, default=0, editable=False),
        ),
        migrations.AddField(
            model_name="participant",
            name="requests_in_window",
            field=models.IntegerField(db_default=0, default=0, editable=False),
        ),
        migrations.RunPython(_tally_triggers(on=True), _tally_triggers(on=False), elidable=False),
        migrations.RunPython(create, drop, elidable=False),
    ]
