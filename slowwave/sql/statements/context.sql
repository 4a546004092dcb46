-- context: the facts an agent should always carry, in the order they are packed into a budget:
-- guidelines first, then identity, then preference; within each, the best corroborated
-- (most source episodes), then the most recent.
SELECT category, fact
FROM semantic_memory
WHERE conversation_id = %(conversation_id)s
  AND category = ANY(%(categories)s::text[])
  AND CASE
          WHEN %(as_of)s::timestamptz IS NULL THEN invalid_at IS NULL
          ELSE valid_at <= %(as_of)s::timestamptz
               AND (invalid_at IS NULL OR invalid_at > %(as_of)s::timestamptz)
      END
ORDER BY array_position(%(categories)s::text[], category),
         cardinality(source_episodic_ids) DESC, valid_at DESC, id
