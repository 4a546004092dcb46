-- change check: for each new fact the plans write, its %(candidates)s nearest active facts of the
-- same conversation at cosine %(lower)s or more, nearest first: the caller pairs it with the
-- nearest about the same person it may end (tasks.changes). None the plans end or act on.
-- Exact cosine over the conversation's active facts (semantic_memory_active_idx, whose first
-- column is the conversation).
SELECT q.ord, d.id, d.fact, 1 - d.distance AS similarity
FROM unnest(%(vectors)b::vector[], %(conversations)s::text[])
     WITH ORDINALITY AS q(vec, conversation_id, ord)
CROSS JOIN LATERAL (
    SELECT s.id, s.fact, cosine_distance(s.embedding, q.vec) AS distance
    FROM semantic_memory s
    WHERE s.conversation_id = q.conversation_id
      AND s.invalid_at IS NULL
      AND NOT (s.id = ANY(%(excluded)s::uuid[]))
    ORDER BY distance, s.id
    LIMIT %(candidates)s
) d
WHERE 1 - d.distance >= %(lower)s
ORDER BY q.ord, d.distance, d.id
