-- Forget a conversation (a privacy request): every row that holds its text or was derived from
-- it goes, in one statement: decisions, chunk records, facts, its profile, ingested message
-- ids, episodes and their vectors;
-- the runs' summaries lose its failure entries (their reasons may quote it). Returns the rows
-- removed per table, for the tombstone. Rare: the decision log and chunks are scanned.
WITH decisions AS (
    DELETE FROM decision_log WHERE conversation_id = %(conversation_id)s RETURNING 1
), chunks AS (
    DELETE FROM consolidation_chunks WHERE conversation_id = %(conversation_id)s RETURNING 1
), facts AS (
    DELETE FROM semantic_memory WHERE conversation_id = %(conversation_id)s RETURNING 1
), profiles AS (
    DELETE FROM conversation_profiles WHERE conversation_id = %(conversation_id)s RETURNING 1
), messages AS (
    DELETE FROM ingested_messages WHERE conversation_id = %(conversation_id)s RETURNING 1
), windows AS (
    DELETE FROM episode_windows WHERE conversation_id = %(conversation_id)s RETURNING 1
), episodes AS (
    DELETE FROM episodic_memory WHERE conversation_id = %(conversation_id)s RETURNING 1
), summaries AS (
    UPDATE consolidation_runs r
    SET summary = jsonb_set(r.summary, '{failures}', coalesce(
            (SELECT jsonb_agg(f) FROM jsonb_array_elements(r.summary -> 'failures') AS f
             WHERE f ->> 'conversation_id' <> %(conversation_id)s),
            '[]'::jsonb))
    WHERE r.summary -> 'failures'
          @> jsonb_build_array(jsonb_build_object('conversation_id', %(conversation_id)s::text))
    RETURNING 1
)
SELECT (SELECT count(*) FROM episodes) AS episodes,
       (SELECT count(*) FROM windows) AS episode_windows,
       (SELECT count(*) FROM messages) AS ingested_messages,
       (SELECT count(*) FROM facts) AS facts,
       (SELECT count(*) FROM profiles) AS profiles,
       (SELECT count(*) FROM decisions) AS decisions,
       (SELECT count(*) FROM chunks) AS chunks,
       (SELECT count(*) FROM summaries) AS run_summaries
