-- Quarantine episodes of this run's claim that can never be consolidated as they are (an
-- episode no cut makes fit the model's context), each with its reason.
UPDATE episodic_memory e
SET quarantined_at = now(), last_error = q.reason, claimed_by = NULL, claimed_until = NULL, claim_shard = NULL
FROM unnest(%(ids)s::uuid[], %(reasons)s::text[]) AS q(id, reason)
WHERE e.id = q.id AND e.claimed_by = %(run_id)s
  AND e.consolidated_at IS NULL AND e.quarantined_at IS NULL
