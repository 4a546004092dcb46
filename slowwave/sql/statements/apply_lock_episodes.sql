-- apply, step 1: the chunks' episodes must still be pending under this run's claim, each in its
-- chunk's conversation, consolidated up to exactly the message the chunk starts it at (a long
-- episode goes in parts). Chunks whose episodes do not all come back are conflicts.
SELECT e.id
FROM episodic_memory e
JOIN unnest(%(ids)s::uuid[], %(messages_from)s::integer[], %(conversations)s::text[])
  AS p(id, messages_from, conversation_id)
  ON p.id = e.id
WHERE e.conversation_id = p.conversation_id
  AND e.consolidated_at IS NULL AND e.quarantined_at IS NULL
  AND e.claimed_by = %(run_id)s
  AND e.consolidated_messages = p.messages_from
FOR UPDATE OF e
