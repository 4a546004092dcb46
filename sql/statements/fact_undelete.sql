-- Undelete: an invalidated fact holds again; a successor that replaced it (an update) is
-- ended where it began (it never held, as the operator now says). The decision log records
-- it as `undeleted`, with who asked and why. One statement: all or nothing.
WITH target AS (
    SELECT id, conversation_id, valid_at FROM semantic_memory
    WHERE id = %(id)s AND invalid_at IS NOT NULL
    FOR UPDATE
), successor AS (
    UPDATE semantic_memory s SET invalid_at = s.valid_at
    FROM target t
    WHERE s.supersedes_id = t.id AND s.invalid_at IS NULL
    RETURNING s.id
), restored AS (
    UPDATE semantic_memory s SET invalid_at = NULL
    FROM target t
    WHERE s.id = t.id
    RETURNING s.id, s.conversation_id, s.source_episodic_ids, s.fact
), logged AS (
    INSERT INTO decision_log (conversation_id, proposed_action, action, fact_id,
                              previous_fact_id, episode_ids, event_time, reason, proposed_fact)
    SELECT r.conversation_id, 'undeleted', 'undeleted', r.id,
           (SELECT min(id::text)::uuid FROM successor), r.source_episodic_ids, now(),
           %(reason)s, r.fact
    FROM restored r
)
SELECT r.id, (SELECT array_agg(id) FROM successor) FROM restored r
