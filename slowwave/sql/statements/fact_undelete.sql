-- Undelete: an invalidated fact holds again; the versions that replaced it (its successors,
-- and theirs, through updates) are ended where they began (they never held, as the operator
-- now says), so the chain has one head again. The decision log records it as `undeleted`,
-- with who asked and why. One statement: all or nothing.
WITH RECURSIVE target AS (
    SELECT id, conversation_id FROM semantic_memory
    WHERE id = %(id)s AND invalid_at IS NOT NULL
    FOR UPDATE
), descendants (id) AS (
    SELECT s.id FROM semantic_memory s JOIN target t ON s.supersedes_id = t.id
    UNION
    SELECT s.id FROM semantic_memory s JOIN descendants d ON s.supersedes_id = d.id
), successor AS (
    UPDATE semantic_memory s SET invalid_at = s.valid_at
    FROM descendants d
    WHERE s.id = d.id AND s.invalid_at IS NULL
    RETURNING s.id
), restored AS (
    UPDATE semantic_memory s SET invalid_at = NULL
    FROM target t
    WHERE s.id = t.id
    RETURNING s.id, s.conversation_id, s.source_episodic_ids, s.fact
), profiled AS (  -- the conversation's profile no longer says what holds
    UPDATE conversation_profiles p SET stale = true
    FROM target t WHERE p.conversation_id = t.conversation_id
    RETURNING 1
), logged AS (
    INSERT INTO decision_log (conversation_id, proposed_action, action, fact_id,
                              previous_fact_id, episode_ids, event_time, reason, proposed_fact)
    SELECT r.conversation_id, 'undeleted', 'undeleted', r.id,
           (SELECT min(id::text)::uuid FROM successor), r.source_episodic_ids, now(),
           %(reason)s, r.fact
    FROM restored r
)
SELECT r.id, (SELECT array_agg(id) FROM successor) FROM restored r
