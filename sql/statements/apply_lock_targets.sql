-- apply, step 2: the facts the plan acts on, locked; only active facts of this conversation.
SELECT id, valid_at FROM semantic_memory
WHERE id = ANY(%(ids)s::uuid[])
  AND conversation_id = %(conversation_id)s
  AND invalid_at IS NULL
FOR UPDATE
