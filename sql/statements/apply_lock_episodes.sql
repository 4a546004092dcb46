-- apply, step 1: the chunk's episodes must still be pending under this run's claim.
SELECT id FROM episodic_memory
WHERE id = ANY(%(ids)s::uuid[])
  AND conversation_id = %(conversation_id)s
  AND consolidated_at IS NULL AND quarantined_at IS NULL
  AND claimed_by = %(run_id)s
FOR UPDATE
