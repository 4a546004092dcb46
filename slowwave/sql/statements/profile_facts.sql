-- profile: the active facts of the conversations whose profile is written, in the order they
-- are packed into the prompt's budget: the best corroborated (most source episodes) first,
-- then the most recent (semantic_memory_active_idx).
SELECT conversation_id, category, fact
FROM semantic_memory
WHERE conversation_id = ANY(%(conversations)s::text[]) AND invalid_at IS NULL
ORDER BY conversation_id, cardinality(source_episodic_ids) DESC, valid_at DESC, id
