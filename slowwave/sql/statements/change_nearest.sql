-- change check: for each update the plans write without naming a fact, its nearest active fact
-- of the same conversation and category when that one is close but not a duplicate (cosine in
-- [%(lower)s, %(upper)s)): the pair the model is asked about. A fact of another category
-- ("Kenji plays in an orchestra", an interest, beside "Kenji switched to day shifts", his
-- work) is no candidate; nor is one the plans end. Exact cosine over the conversation's
-- active facts (semantic_memory_active_idx, whose first columns are conversation, category).
SELECT q.ord, d.id, d.fact, 1 - d.distance AS similarity
FROM unnest(%(vectors)b::vector[], %(conversations)s::text[], %(categories)s::text[])
     WITH ORDINALITY AS q(vec, conversation_id, category, ord)
CROSS JOIN LATERAL (
    SELECT s.id, s.fact, cosine_distance(s.embedding, q.vec) AS distance
    FROM semantic_memory s
    WHERE s.conversation_id = q.conversation_id
      AND s.category = q.category
      AND s.invalid_at IS NULL
      AND NOT (s.id = ANY(%(excluded)s::uuid[]))
    ORDER BY distance, s.id
    LIMIT 1
) d
WHERE 1 - d.distance >= %(lower)s AND 1 - d.distance < %(upper)s
ORDER BY q.ord
