-- apply: end the validity of facts (update and invalidate) at event time. Never before the
-- fact became valid: a late-arriving older episode cannot make a fact end before it began.
UPDATE semantic_memory s
SET invalid_at = greatest(t.at, s.valid_at)
FROM unnest(%(fact_ids)s::uuid[], %(times)s::timestamptz[]) AS t(fact_id, at)
WHERE s.id = t.fact_id
  AND s.conversation_id = %(conversation_id)s
  AND s.invalid_at IS NULL
