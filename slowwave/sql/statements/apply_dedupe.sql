-- apply, dedupe: for each fact the plans write (new facts and new versions), its nearest
-- active facts of the same conversation (exact, cosine), keeping those at or above the
-- threshold. Facts the plans update or invalidate are not merge targets. Their validity and
-- vector come back too: a later action of a plan may act on the fact a new one merged into.
-- The vectors travel in binary (%(vectors)b): as text, formatting them cost more than the
-- query.
SELECT q.ord, d.id, 1 - d.distance AS similarity, d.valid_at, d.embedding
FROM unnest(%(vectors)b::vector[], %(conversations)s::text[])
     WITH ORDINALITY AS q(vec, conversation_id, ord)
CROSS JOIN LATERAL (
    SELECT s.id, s.valid_at, s.embedding, cosine_distance(s.embedding, q.vec) AS distance
    FROM semantic_memory s
    WHERE s.conversation_id = q.conversation_id
      AND s.invalid_at IS NULL
      AND NOT (s.id = ANY(%(excluded)s::uuid[]))
    ORDER BY distance, s.id
    LIMIT %(candidates)s
) d
WHERE 1 - d.distance >= %(threshold)s
ORDER BY q.ord, d.distance, d.id
