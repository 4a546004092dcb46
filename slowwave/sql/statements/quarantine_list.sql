-- The quarantined episodes (of some conversations, or of one tenant's), oldest quarantine
-- first.
SELECT id, conversation_id, external_key, attempts, last_error, quarantined_at, start_at, end_at
FROM episodic_memory
WHERE quarantined_at IS NOT NULL
  AND (%(conversations)s::text[] IS NULL OR conversation_id = ANY(%(conversations)s::text[]))
  AND (%(tenant)s::text IS NULL OR slowwave_tenant(conversation_id) = %(tenant)s)
ORDER BY quarantined_at, conversation_id, start_at, id
LIMIT %(limit)s
