-- apply, step 1: the chunk's episodes must still be pending under this run's claim, each
-- consolidated up to exactly the message the chunk starts it at (a long episode goes in parts).
SELECT e.id
FROM episodic_memory e
JOIN unnest(%(ids)s::uuid[], %(messages_from)s::integer[]) AS p(id, messages_from)
  ON p.id = e.id
WHERE e.conversation_id = %(conversation_id)s
  AND e.consolidated_at IS NULL AND e.quarantined_at IS NULL
  AND e.claimed_by = %(run_id)s
  AND e.consolidated_messages = p.messages_from
FOR UPDATE OF e
