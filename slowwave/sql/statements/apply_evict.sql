-- apply: a conversation holding more active facts than %(cap)s retires the excess, in the
-- applying chunk's transaction: never-retrieved before retrieved, fewer source episodes
-- (less corroborated) before more, least recently retrieved (or created) first. A retired fact
-- is invalidated at the chunk's event time (never before it began) with the reason `evicted`
-- in the decision log, never deleted; a revert of the run restores it like any invalidation.
WITH plans AS (
    SELECT * FROM unnest(%(conversations)s::text[], %(chunk_ids)s::uuid[],
                         %(times)s::timestamptz[]) AS p(conversation_id, chunk_id, at)
), ranked AS (
    SELECT s.id, p.chunk_id, p.at,
           row_number() OVER (
               PARTITION BY s.conversation_id
               ORDER BY s.last_retrieved_at IS NOT NULL DESC,
                        cardinality(s.source_episodic_ids) DESC,
                        coalesce(s.last_retrieved_at, s.created_at) DESC,
                        s.valid_at DESC, s.id
           ) AS keep_rank
    FROM semantic_memory s JOIN plans p USING (conversation_id)
    WHERE s.invalid_at IS NULL
), evicted AS (
    UPDATE semantic_memory s
    SET invalid_at = greatest(r.at, s.valid_at)
    FROM ranked r
    WHERE s.id = r.id AND r.keep_rank > %(cap)s
    RETURNING s.id, s.conversation_id, r.chunk_id, r.at, s.source_episodic_ids
)
INSERT INTO decision_log (run_id, conversation_id, chunk_id, proposed_action, action, fact_id,
                          episode_ids, event_time, reason)
SELECT %(run_id)s, conversation_id, chunk_id, 'evict', 'invalidate', id, source_episodic_ids,
       at, 'evicted'
FROM evicted
RETURNING chunk_id
