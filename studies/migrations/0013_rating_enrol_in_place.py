"""`rating_enrol_in_place`: a newcomer enrolled in a rating study as one PostgreSQL statement.

Enrolment (`studies.participants.participant_enroll`) locks the study's row, counts each condition's
participants, inserts the participant, deals their pages and inserts them: six statements between BEGIN and
COMMIT, the study's row locked from the first to the last round trip. This function does the same in one: the
lock is held for the statement's own work only, and its queries' plans are kept for the connection's life.

It takes the common case only: a live rating study that is not a wave, a newcomer (no participant with this id),
no participant whose hold has lapsed (those are timed out and their pages given back first, by the Python path).
Everything else writes nothing and answers `fallback`, and the Python path runs: `studies/enrol_statement.py`
says when it is called, `tests/studies/test_enrol_statement.py` holds the two paths to the same rows.

The rules are the Python path's (studies/balancing.py, studies/kinds/rating.py):
* the condition: the least filled of the enrolling conditions that have an eligible response (sample 0, not
  flagged) and are below their quota (the condition's, or the study's per condition), counting completed and
  holding participants (active, seen within the time limit and, on the consent step, within the consent hold),
  previews left out; ties by a hash of the condition's id with the participant's first two draws;
* the responses: the condition's eligible responses with the fewest pages (`studies_responsetally`), ties by
  the hash with the next two draws, as many as the study shows; their order on the pages by the hash with the
  last two draws; the study's attention checks placed after `after_item` regular items.

Each statement of a PL/pgSQL function sees what was committed before it started, so the counts read after the
lock see every enrolment that held it before.

A condition's participants are found by the condition alone (its participants are the study's): the function
keeps its plans for the connection's life, and a plan made while the table's statistics were still those of an
empty table found them through the study, reading every participant of the study once per condition.

Outcomes (`outcome`): `enrolled` (the participant's id and condition), `existing` (the id of the participant
who has this external id), `full` (nothing written), `fallback` (nothing written).
"""

from django.db import migrations

TIE_BREAK = r"""
CREATE OR REPLACE FUNCTION studies_tie_break(x bigint, a bigint, b bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT ((((((x # a) * 2654435761) % 4294967291) # b) * 1597334677) % 4294967291)
$fn$;
"""

FUNCTION = r"""
CREATE OR REPLACE FUNCTION rating_enrol_in_place(
    p_study bigint, p_external_id text, p_platform text, p_platform_study_id text, p_platform_session_id text,
    p_mturk_assignment_id text, p_mturk_hit_id text, p_seed bigint, p_now timestamptz,
    p_consent_cutoff timestamptz, p_draws bigint[])
RETURNS TABLE (outcome text, participant_id bigint, condition_id bigint)
LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
DECLARE
    st record;
    found_id bigint;
    chosen bigint;
    new_id bigint;
    stale_cutoff timestamptz;
BEGIN
    SELECT s.id, s.kind, s.state, s.parent_id, s.quota_per_condition, s.time_limit_minutes,
           s.items_per_participant
      INTO st FROM studies_study s WHERE s.id = p_study FOR UPDATE;
    IF NOT FOUND OR st.kind <> 'rating' OR st.state <> 'live' OR st.parent_id IS NOT NULL THEN
        RETURN QUERY SELECT 'fallback'::text, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;

    SELECT p.id INTO found_id FROM studies_participant p
     WHERE p.study_id = p_study AND p.external_id = p_external_id;
    IF found_id IS NOT NULL THEN
        RETURN QUERY SELECT 'existing'::text, found_id, NULL::bigint;
        RETURN;
    END IF;

    stale_cutoff := p_now - make_interval(mins => st.time_limit_minutes);
    IF EXISTS (SELECT 1 FROM studies_participant p
                WHERE p.study_id = p_study AND p.status = 'active'
                  AND NOT (p.last_seen_at >= stale_cutoff
                           AND (p.step <> 'consent' OR p.last_seen_at >= p_consent_cutoff))) THEN
        RETURN QUERY SELECT 'fallback'::text, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;

    SELECT c.id INTO chosen FROM (
        SELECT c.id, COALESCE(c.quota, st.quota_per_condition) AS quota,
               (SELECT count(*) FROM studies_participant p
                 WHERE p.condition_id = c.id AND NOT p.is_preview
                   AND (p.status = 'completed'
                        OR (p.status = 'active' AND p.last_seen_at >= stale_cutoff
                            AND (p.step <> 'consent' OR p.last_seen_at >= p_consent_cutoff)))) AS n
          FROM studies_condition c
         WHERE c.study_id = p_study AND c.enrolling
           AND EXISTS (SELECT 1 FROM studies_response r
                        WHERE r.condition_id = c.id AND r.sample_index = 0 AND r.review <> 'flagged')
    ) c
     WHERE c.n < c.quota
     ORDER BY c.n, studies_tie_break(c.id, p_draws[1], p_draws[2]), c.id
     LIMIT 1;
    IF chosen IS NULL THEN
        RETURN QUERY SELECT 'full'::text, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;

    INSERT INTO studies_participant (
        study_id, condition_id, external_id, platform, platform_study_id, platform_session_id,
        mturk_assignment_id, mturk_hit_id, is_preview, status, step, seed, flagged_for_exclusion,
        exclusion_reasons, attention_failures, teq_answers, teq_score, demographics, completion_code,
        started_at, last_seen_at, finished_at)
    VALUES (
        p_study, chosen, p_external_id, p_platform, p_platform_study_id, p_platform_session_id,
        p_mturk_assignment_id, p_mturk_hit_id, false, 'active', 'consent', p_seed, false,
        '[]'::jsonb, 0, NULL, NULL, NULL, '', p_now, p_now, NULL)
    RETURNING id INTO new_id;

    INSERT INTO studies_assignment (participant_id, position, kind, response_id, attention_check_id,
                                    situation_id, shown_at, answered_at)
    WITH checks AS (
        SELECT k.id, k.after_item, (row_number() OVER (ORDER BY k.after_item, k.id) - 1) AS rank
          FROM studies_attentioncheck k WHERE k.study_id = p_study
    ), picked AS (
        SELECT r.id FROM studies_response r
          LEFT JOIN studies_responsetally t ON t.response_id = r.id
         WHERE r.condition_id = chosen AND r.sample_index = 0 AND r.review <> 'flagged'
         ORDER BY COALESCE(t.live_assignments, 0), studies_tie_break(r.id, p_draws[3], p_draws[4]), r.id
         LIMIT st.items_per_participant
    ), ordered AS (
        SELECT x.id, (row_number() OVER (ORDER BY studies_tie_break(x.id, p_draws[5], p_draws[6]), x.id) - 1) AS i
          FROM picked x
    )
    SELECT new_id, o.i + (SELECT count(*) FROM checks k WHERE k.after_item <= o.i), 'response'::text, o.id,
           NULL::bigint, NULL::bigint, NULL::timestamptz, NULL::timestamptz
      FROM ordered o
    UNION ALL
    SELECT new_id, LEAST(k.after_item, (SELECT count(*) FROM picked)) + k.rank, 'attention', NULL, k.id,
           NULL, NULL, NULL
      FROM checks k;

    RETURN QUERY SELECT 'enrolled'::text, new_id, chosen;
END
$fn$;
"""

DROP = """
DROP FUNCTION IF EXISTS rating_enrol_in_place(bigint, text, text, text, text, text, text, bigint, timestamptz,
                                              timestamptz, bigint[]);
DROP FUNCTION IF EXISTS studies_tie_break(bigint, bigint, bigint);
"""


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TIE_BREAK, params=None)  # its % is an operator, not a placeholder
        schema_editor.execute(FUNCTION)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("studies", "0012_rating_items_begin_in_place")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
