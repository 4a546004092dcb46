-- change check: for each update that counts again what its known fact counts, the known fact's
-- sentence and the %(candidates)s active facts of the same conversation nearest the update's
-- new fact at cosine %(lower)s or more, nearest first: the caller ends those about the same
-- person that state the count the update replaces (tasks.changes). None the plans end or act on.
SELECT q.ord, t.fact AS known_fact, d.id, d.fact, 1 - d.distance AS similarity
FROM unnest(%(vectors)b::vector[], %(conversations)s::text[], %(targets)s::uuid[])
     WITH ORDINALITY AS q(vec, conversation_id, target_id, ord)
JOIN semantic_memory t ON t.id = q.target_id
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
