-- The conversations of one tenant (or of every tenant: %(tenant)s null), in id order from
-- %(after)s (exclusive; null: the first), those whose id starts with %(prefix)s, at most
-- %(limit)s, each at a glance: episodes pending, consolidated and quarantined, facts active,
-- the last message and the last run that touched it.
-- The distinct ids are walked through episodic_memory_latest_idx one probe each (a loose index
-- scan), so a page costs its rows, not the table: a tenant of 100,000 conversations pages as
-- fast as one of ten. %(lo)s is where the walk starts (the tenant's key of the prefix).
WITH RECURSIVE walk(key) AS (
    (SELECT conversation_id FROM episodic_memory
     WHERE conversation_id >= %(lo)s AND (%(after)s::text IS NULL OR conversation_id > %(after)s)
     ORDER BY conversation_id LIMIT 1)
    UNION ALL
    SELECT (SELECT e.conversation_id FROM episodic_memory e
            WHERE e.conversation_id > w.key
            ORDER BY e.conversation_id LIMIT 1)
    FROM walk w
    WHERE w.key IS NOT NULL
), page AS (
    SELECT key FROM walk
    WHERE key IS NOT NULL
      AND (%(tenant)s::text IS NULL OR slowwave_tenant(key) = %(tenant)s)
      AND starts_with(slowwave_conversation(key), %(prefix)s)
    LIMIT %(limit)s
)
SELECT p.key AS conversation_key, slowwave_tenant(p.key) AS tenant,
       slowwave_conversation(p.key) AS conversation_id, glance.*,
       (SELECT count(*) FROM semantic_memory f
        WHERE f.conversation_id = p.key AND f.invalid_at IS NULL) AS facts_active,
       (SELECT c.run_id FROM consolidation_chunks c
        WHERE c.conversation_id = p.key ORDER BY c.recorded_at DESC LIMIT 1) AS last_run_id
FROM page p
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE consolidated_at IS NULL AND quarantined_at IS NULL)
               AS episodes_pending,
           count(*) FILTER (WHERE consolidated_at IS NOT NULL) AS episodes_consolidated,
           count(*) FILTER (WHERE quarantined_at IS NOT NULL) AS episodes_quarantined,
           max(end_at) AS last_message_at
    FROM episodic_memory e WHERE e.conversation_id = p.key
) AS glance
ORDER BY p.key
