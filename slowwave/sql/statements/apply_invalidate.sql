-- apply: end the validity of facts (update and invalidate) at event time, each only in its
-- plan's conversation. Never before the fact became valid: a late-arriving older episode
-- cannot make a fact end before it began.
UPDATE semantic_memory s
SET invalid_at = greatest(t.at, s.valid_at)
FROM unnest(%(fact_ids)s::uuid[], %(times)s::timestamptz[], %(conversations)s::text[])
  AS t(fact_id, at, conversation_id)
WHERE s.id = t.fact_id
  AND s.conversation_id = t.conversation_id
  AND s.invalid_at IS NULL
