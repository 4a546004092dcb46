-- apply, dedupe: for each fact the plans write (new facts and new versions), its nearest
-- active facts of the same conversation, keeping those at or above the threshold: by cosine
-- (exact), or one that says the same sentence (%(said)s: the sentence lowercased, its words
-- joined by one space, as models.fact.said makes it) under another category or other
-- keywords, which counts as 1 whatever their vectors. Facts the plans update or invalidate are
-- not merge targets. Their validity and vector come back too: a later action of a plan may act
-- on the fact a new one merged into. The vectors travel in binary (%(vectors)b): as text,
-- formatting them cost more than the query. The stored sentence comes back too: two sentences
-- that state different numbers are no duplicates, however near (tasks.apply_locks).
WITH q AS MATERIALIZED (
    SELECT *
    FROM unnest(%(vectors)b::vector[], %(conversations)s::text[], %(said)s::text[])
         WITH ORDINALITY AS q(vec, conversation_id, said, ord)
), found AS (
    SELECT q.ord, d.id, 1 - d.distance AS similarity, d.valid_at, d.embedding, d.fact
    FROM q
    CROSS JOIN LATERAL (
        SELECT s.id, s.valid_at, s.embedding, s.fact, cosine_distance(s.embedding, q.vec) AS distance
        FROM semantic_memory s
        WHERE s.conversation_id = q.conversation_id
          AND s.invalid_at IS NULL
          AND NOT (s.id = ANY(%(excluded)s::uuid[]))
        ORDER BY distance, s.id
        LIMIT %(candidates)s
    ) d
    WHERE 1 - d.distance >= %(threshold)s
    UNION ALL
    SELECT q.ord, s.id, 1.0::float8, s.valid_at, s.embedding, s.fact
    FROM q
    JOIN semantic_memory s
      ON s.conversation_id = q.conversation_id
     AND s.invalid_at IS NULL
     AND NOT (s.id = ANY(%(excluded)s::uuid[]))
     AND btrim(regexp_replace(lower(s.fact), '[^[:alnum:]]+', ' ', 'g')) = q.said
)
SELECT ord, id, similarity, valid_at, embedding, fact
FROM (
    SELECT DISTINCT ON (ord, id) ord, id, similarity, valid_at, embedding, fact
    FROM found
    ORDER BY ord, id, similarity DESC
) AS best
ORDER BY ord, similarity DESC, id
