-- apply, dedupe: for each fact the plan writes (new facts and new versions), its nearest
-- active facts of the same conversation (exact, cosine), keeping those at or above the
-- threshold. Facts this plan updates or invalidates are not merge targets. Their validity and
-- vector come back too: a later action of the plan may act on the fact a new one merged into.
SELECT q.ord, d.id, 1 - d.distance AS similarity, d.valid_at, d.embedding
FROM unnest(%(vectors)s::vector[]) WITH ORDINALITY AS q(vec, ord)
CROSS JOIN LATERAL (
    SELECT s.id, s.valid_at, s.embedding, cosine_distance(s.embedding, q.vec) AS distance
    FROM semantic_memory s
    WHERE s.conversation_id = %(conversation_id)s
      AND s.invalid_at IS NULL
      AND NOT (s.id = ANY(%(excluded)s::uuid[]))
    ORDER BY distance, s.id
    LIMIT %(candidates)s
) d
WHERE 1 - d.distance >= %(threshold)s
ORDER BY q.ord, d.distance, d.id
