-- A chunk failed: count the attempt, keep the reason, quarantine after %(max_attempts)s.
-- Only episodes this run still holds are charged: a run is never charged for episodes
-- another run took over.
UPDATE episodic_memory
SET attempts = attempts + 1,
    last_error = %(reason)s,
    quarantined_at = CASE WHEN attempts + 1 >= %(max_attempts)s THEN now() END
WHERE id = ANY(%(ids)s::uuid[])
  AND consolidated_at IS NULL AND quarantined_at IS NULL
  AND claimed_by = %(run_id)s
RETURNING quarantined_at IS NOT NULL AS quarantined
