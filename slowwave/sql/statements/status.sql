-- Episodes and facts per conversation, for `slowwave db status`: with the size of the active
-- facts in characters and in estimated tokens (about four characters a token), what a
-- capacity cap (SLOWWAVE_MAX_ACTIVE_FACTS) and a context budget are judged against.
WITH episodes AS (
    SELECT conversation_id,
           count(*) FILTER (WHERE consolidated_at IS NULL AND quarantined_at IS NULL) AS pending,
           count(*) FILTER (WHERE consolidated_at IS NOT NULL) AS consolidated,
           count(*) FILTER (WHERE quarantined_at IS NOT NULL) AS quarantined
    FROM episodic_memory
    GROUP BY conversation_id
), facts AS (
    SELECT conversation_id,
           count(*) FILTER (WHERE invalid_at IS NULL) AS active,
           count(*) FILTER (WHERE invalid_at IS NOT NULL) AS invalidated,
           sum(length(fact)) FILTER (WHERE invalid_at IS NULL) AS active_chars,
           sum(ceil(length(fact) / 4.0)) FILTER (WHERE invalid_at IS NULL) AS active_tokens
    FROM semantic_memory
    GROUP BY conversation_id
)
SELECT conversation_id,
       coalesce(e.pending, 0)      AS episodes_pending,
       coalesce(e.consolidated, 0) AS episodes_consolidated,
       coalesce(e.quarantined, 0)  AS episodes_quarantined,
       coalesce(f.active, 0)       AS facts_active,
       coalesce(f.invalidated, 0)  AS facts_invalidated,
       coalesce(f.active_chars, 0)::bigint  AS facts_active_chars,
       coalesce(f.active_tokens, 0)::bigint AS facts_active_tokens
FROM episodes e
FULL JOIN facts f USING (conversation_id)
ORDER BY conversation_id
