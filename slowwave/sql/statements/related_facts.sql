-- predict: for each query (conversation, vector) the nearest active facts of that conversation.
-- cosine_distance() rather than the <=> operator keeps this an exact scan over the
-- conversation's own active facts (partial index semantic_memory_active_idx): an HNSW scan
-- filtered to one conversation afterwards can return fewer than %(limit)s rows. The vectors
-- travel in binary (%(vectors)b).
SELECT q.ord, f.id, f.conversation_id, f.category, f.fact, f.keywords, f.source_episodic_ids,
       f.valid_at, f.invalid_at, f.supersedes_id, f.distance
FROM unnest(%(conversations)s::text[], %(vectors)b::vector[]) WITH ORDINALITY
     AS q(conversation_id, vec, ord)
CROSS JOIN LATERAL (
    SELECT s.id, s.conversation_id, s.category, s.fact, s.keywords, s.source_episodic_ids,
           s.valid_at, s.invalid_at, s.supersedes_id,
           cosine_distance(s.embedding, q.vec) AS distance
    FROM semantic_memory s
    WHERE s.conversation_id = q.conversation_id AND s.invalid_at IS NULL
    ORDER BY distance, s.id
    LIMIT %(limit)s
) f
ORDER BY q.ord, f.distance, f.id
