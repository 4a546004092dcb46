-- Episodes of one conversation by id (a fact's sources), oldest first, with their messages.
SELECT id, start_at, end_at, consolidated_at IS NULL AS pending, quarantined_at, messages
FROM episodic_memory
WHERE id = ANY(%(ids)s::uuid[]) AND conversation_id = %(conversation_id)s
ORDER BY start_at, id
