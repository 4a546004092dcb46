-- gray zone: for each fact the plans write, its nearest active fact of the same conversation
-- when that one is close but not a duplicate (cosine in [%(lower)s, %(upper)s)): the pair the
-- model is asked to judge. Facts the plans end are not candidates. Exact cosine over the
-- conversation's active facts (semantic_memory_active_idx), as apply's dedupe.
SELECT q.ord, d.id, d.fact, 1 - d.distance AS similarity, d.embedding
FROM unnest(%(vectors)b::vector[], %(conversations)s::text[])
     WITH ORDINALITY AS q(vec, conversation_id, ord)
CROSS JOIN LATERAL (
    SELECT s.id, s.fact, s.embedding, cosine_distance(s.embedding, q.vec) AS distance
    FROM semantic_memory s
    WHERE s.conversation_id = q.conversation_id
      AND s.invalid_at IS NULL
      AND NOT (s.id = ANY(%(excluded)s::uuid[]))
    ORDER BY distance, s.id
    LIMIT 1
) d
WHERE 1 - d.distance >= %(lower)s AND 1 - d.distance < %(upper)s
ORDER BY q.ord
