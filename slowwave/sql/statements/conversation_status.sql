-- One conversation at a glance (slowwave serve's status): its episodes pending, consolidated
-- and quarantined, when its oldest pending episode was recorded (how long it has waited for a
-- run), when it was last consolidated, and its facts.
SELECT
    count(*) FILTER (WHERE consolidated_at IS NULL AND quarantined_at IS NULL) AS episodes_pending,
    count(*) FILTER (WHERE consolidated_at IS NOT NULL) AS episodes_consolidated,
    count(*) FILTER (WHERE quarantined_at IS NOT NULL) AS episodes_quarantined,
    min(created_at) FILTER (WHERE consolidated_at IS NULL AND quarantined_at IS NULL)
        AS oldest_pending_at,
    max(consolidated_at) AS last_consolidated_at,
    max(end_at) AS last_message_at,
    (SELECT count(*) FROM semantic_memory f
     WHERE f.conversation_id = %(conversation_id)s AND f.invalid_at IS NULL) AS facts_active,
    (SELECT count(*) FROM semantic_memory f
     WHERE f.conversation_id = %(conversation_id)s AND f.invalid_at IS NOT NULL)
        AS facts_invalidated
FROM episodic_memory
WHERE conversation_id = %(conversation_id)s
