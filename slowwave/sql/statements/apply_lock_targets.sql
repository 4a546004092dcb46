-- apply, step 2: the facts the plans act on, locked; each only an active fact of the acting
-- plan's own conversation. Their vectors let the decisions tell a restated update from a
-- change.
SELECT s.id, s.valid_at, s.embedding, s.fact
FROM semantic_memory s
JOIN unnest(%(ids)s::uuid[], %(conversations)s::text[]) AS t(id, conversation_id)
  ON t.id = s.id
WHERE s.conversation_id = t.conversation_id
  AND s.invalid_at IS NULL
FOR UPDATE OF s
