-- A run is still working: extend its lease on every episode it holds and has not finished.
-- Episodes another run took over after an expired lease are no longer ours and stay theirs.
UPDATE episodic_memory
SET claimed_until = now() + make_interval(secs => %(lease_s)s)
WHERE claimed_by = %(run_id)s
  AND consolidated_at IS NULL AND quarantined_at IS NULL
