-- apply, slots: the active facts holding the slots the plans fill, one per (conversation,
-- slot), locked. Their validity and vector come back: a new value in a filled slot becomes an
-- update of the holder, or a reinforcement when it restates it.
SELECT s.id, s.conversation_id, s.slot, s.valid_at, s.embedding, s.fact
FROM semantic_memory s
JOIN unnest(%(conversations)s::text[], %(slots)s::text[]) AS t(conversation_id, slot)
  ON s.conversation_id = t.conversation_id AND s.slot = t.slot
WHERE s.invalid_at IS NULL
FOR UPDATE OF s
