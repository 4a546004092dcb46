-- apply, last step: the chunk's episodes are consolidated by this run.
UPDATE episodic_memory
SET consolidated_at = now(),
    consolidation_run_id = %(run_id)s,
    gated = (id = ANY(%(gated)s::uuid[])),
    last_error = NULL,
    claimed_by = NULL,
    claimed_until = NULL
WHERE id = ANY(%(ids)s::uuid[])
