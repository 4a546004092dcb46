-- Release quarantined episodes (all of some conversations, or the ones named) back to pending,
-- attempts reset, and record the release in the decision log, one row per conversation with
-- the episodes it released and the operator's reason. One statement: both or neither.
WITH released AS (
    UPDATE episodic_memory e
    SET quarantined_at = NULL, attempts = 0, last_error = NULL,
        claimed_by = NULL, claimed_until = NULL, claim_shard = NULL
    WHERE e.quarantined_at IS NOT NULL
      AND (%(conversations)s::text[] IS NULL OR e.conversation_id = ANY(%(conversations)s::text[]))
      AND (%(episodes)s::uuid[] IS NULL OR e.id = ANY(%(episodes)s::uuid[]))
    RETURNING e.id, e.conversation_id
), logged AS (
    INSERT INTO decision_log (conversation_id, proposed_action, action, episode_ids, event_time,
                              reason)
    SELECT conversation_id, 'released', 'released', array_agg(id ORDER BY id), now(),
           %(reason)s
    FROM released
    GROUP BY conversation_id
)
SELECT conversation_id, count(*) FROM released GROUP BY conversation_id ORDER BY conversation_id
