-- apply, step 2: the facts the plan acts on, locked; only active facts of this conversation.
-- Their vectors let the decisions tell a restated update from a change.
SELECT id, valid_at, embedding FROM semantic_memory
WHERE id = ANY(%(ids)s::uuid[])
  AND conversation_id = %(conversation_id)s
  AND invalid_at IS NULL
FOR UPDATE
